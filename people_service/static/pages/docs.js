// Starts Swagger UI on /docs over the service's OpenAPI document; a file rather than an inline
// script, so that the page's Content-Security-Policy can refuse every inline script.
"use strict";
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: document.getElementById("swagger-ui").dataset.openapi,
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    // the public validator would be a request to another host
    validatorUrl: null,
    // keys typed into "Authorize" stay in this tab only
    persistAuthorization: false,
  });
});
