step "prerequisites"
apt_need build-essential cmake pkg-config libsqlite3-dev
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)"; exit 1; }
rustup component list --installed 2>/dev/null | grep -q rustfmt || rustup component add rustfmt clippy >/dev/null 2>&1 || true
