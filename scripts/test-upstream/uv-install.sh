#!/bin/sh
# akbench's test stand-in for astral.sh's uv installer @VERSION@ (scripts/test-upstream):
# what the real one does, short: download the release tarball, unpack uv and uvx into
# $HOME/.local/bin, write $HOME/.local/bin/env.
set -eu
url="@URL@"
bin="${XDG_BIN_HOME:-$HOME/.local/bin}"
tmp="$(mktemp -d)"
if command -v curl >/dev/null 2>&1; then
  curl -LsSf "$url" -o "$tmp/uv.tar.gz"
else
  wget -q -O "$tmp/uv.tar.gz" "$url"
fi
tar -xzf "$tmp/uv.tar.gz" -C "$tmp"
mkdir -p "$bin"
cp "$tmp/uv-x86_64-unknown-linux-gnu/uv" "$tmp/uv-x86_64-unknown-linux-gnu/uvx" "$bin/"
chmod +x "$bin/uv" "$bin/uvx"
cat > "$bin/env" <<'ENV'
#!/bin/sh
case ":${PATH}:" in
    *:"$HOME/.local/bin":*) ;;
    *) export PATH="$HOME/.local/bin:$PATH" ;;
esac
ENV
rm -rf "$tmp"
echo "everything's installed!"
