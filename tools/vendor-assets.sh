#!/usr/bin/env bash
# Refreshes the browser assets the service serves itself (GraphQL Playground, GraphiQL and
# Swagger UI) from the npm registry into people_service/static/vendor.
#
# To upgrade one: change its version below, run this script, run `pytest tests/test_browser.py`
# (the pages are exercised in a real Chromium), and commit the result. The files are copied
# unchanged from the published packages, each with its licence; manifest.json records the
# version, the registry's integrity hash of the tarball and a SHA-256 of every file copied.
set -euo pipefail
cd "$(dirname "$0")/.."

# package@version, then the files the pages load (paths inside the package)
PACKAGES=(
  "graphql-playground-react@1.7.28 build/static/js/middleware.js build/static/css/index.css build/favicon.png build/logo.png"
  "graphiql@4.1.2 dist/index.umd.js dist/style.css"
  "react@18.3.1 umd/react.production.min.js"
  "react-dom@18.3.1 umd/react-dom.production.min.js"
  "swagger-ui-dist@5.35.0 swagger-ui-bundle.js swagger-ui.css favicon-32x32.png"
)

dest=people_service/static/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/out"

for entry in "${PACKAGES[@]}"; do
  read -r spec files <<< "$entry"
  name=${spec%@*}
  npm pack --silent --json --pack-destination "$work" "$spec" > "$work/$name.json"
  tarball=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[0]["filename"])' "$work/$name.json")
  mkdir -p "$work/$name"
  tar -xzf "$work/$tarball" -C "$work/$name"
  package="$work/$name/package"
  target="$work/out/$spec"
  mkdir -p "$target"
  for file in $files; do
    mkdir -p "$target/$(dirname "$file")"
    cp "$package/$file" "$target/$file"
    # bundles name the licences of the code they include beside them
    if [ -f "$package/$file.LICENSE.txt" ]; then cp "$package/$file.LICENSE.txt" "$target/$file.LICENSE.txt"; fi
  done
  found=0
  for notice in "$package"/LICENSE* "$package"/LICENCE* "$package"/NOTICE*; do
    if [ -f "$notice" ]; then cp "$notice" "$target/"; found=1; fi
  done
  if [ "$found" = 0 ]; then echo "no licence file in $spec" >&2; exit 1; fi
  cp "$package/package.json" "$work/$name.package.json"
done

python3 - "$work" "${PACKAGES[@]}" <<'PY'
import hashlib, json, pathlib, sys

work = pathlib.Path(sys.argv[1])
manifest = {}
for entry in sys.argv[2:]:
    spec = entry.split()[0]
    name, version = spec.rsplit("@", 1)
    meta = json.loads((work / f"{name}.package.json").read_text())
    packed = json.loads((work / f"{name}.json").read_text())[0]
    root = work / "out" / spec
    manifest[name] = {
        "version": version,
        "license": meta.get("license"),
        "integrity": packed["integrity"],
        "files": {
            str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*"))
            if path.is_file()
        },
    }
(work / "out" / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
PY

rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
cp -r "$work/out" "$dest"
echo "vendored into $dest:"
du -sh "$dest"/*@*
