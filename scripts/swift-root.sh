#!/usr/bin/env bash
# Builds and tests the Swift package (bindings/swift) with a real Swift toolchain. Debian 12 has
# no Swift, Debian 13 ships Swift 6 as `swiftlang`, so this script makes a Debian 13 root with
# debootstrap, installs the toolchain in it, copies in the freshly built libagentao.so and
# agentao.h (with an agentao.pc, so the package's `.systemLibrary(pkgConfig: "agentao")`
# resolves), and runs `swift build` and `swift test` there with chroot.
#
#   scripts/swift-root.sh            set up the root if needed, then build and test
#   scripts/swift-root.sh setup      only set up the root (cached under build/, see STAMP)
#   scripts/swift-root.sh shell      an interactive shell in the root, with /proc and /dev mounted
#
# Needs root (debootstrap, mount, chroot) and Debian's mirror. Exit status 3 means "cannot run
# here" (the reason is printed), so a caller can report a skip rather than a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
ROOT_DIR=$REPO/build/swift-root
# The stamp names what the root was made with; changing the list rebuilds the root.
PACKAGES="swiftlang libc6-dev pkg-config ca-certificates git"
STAMP=$REPO/build/swift-root.stamp
STAMP_TEXT="trixie minbase + $PACKAGES"
PKG_DIR=/src/agentao-swift

cannot() { echo "cannot run the Swift tests here: $*" >&2; exit 3; }

# The same mirror host this machine's apt uses, so the root needs no other network access
# (AGENTAO_DEBIAN_MIRROR overrides it).
mirror() {
  local u
  [ -n "${AGENTAO_DEBIAN_MIRROR:-}" ] && { echo "$AGENTAO_DEBIAN_MIRROR"; return; }
  u=$(grep -hoE '^(URIs:|deb)[[:space:]]+[a-z]+://[^ ]+/debian/?([[:space:]]|$)' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list \
        2>/dev/null | grep -oE '[a-z]+://[^ ]+' | head -n1 || true)
  echo "${u:-http://deb.debian.org/debian}"
}

# Processes still running in the root when the script stops (an interrupted or timed-out test
# run); they are ours, found by their root directory.
kill_root_procs() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$ROOT_DIR" ] && kill -9 "${p#/proc/}" 2>/dev/null
  done
  return 0
}

mounted=()
unmount_all() {
  local i
  kill_root_procs
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
  mounted=()
}
trap unmount_all EXIT
trap 'exit 130' INT TERM

mount_fs() {
  mountpoint -q "$ROOT_DIR/proc" || { mount -t proc proc "$ROOT_DIR/proc"; mounted+=("$ROOT_DIR/proc"); }
  mountpoint -q "$ROOT_DIR/dev" || { mount --bind /dev "$ROOT_DIR/dev"; mounted+=("$ROOT_DIR/dev"); }
  cp -L /etc/resolv.conf "$ROOT_DIR/etc/resolv.conf" 2>/dev/null || true
}

in_root() { chroot "$ROOT_DIR" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 TERM=dumb "$@"; }

setup_root() {
  if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_TEXT" ] && { [ -L "$ROOT_DIR/usr/bin/swift" ] || [ -x "$ROOT_DIR/usr/bin/swift" ]; }; then
    echo "swift root: cached ($ROOT_DIR)"
    return 0
  fi
  # A root of the same base with fewer packages only needs the new ones.
  if [ -f "$STAMP" ] && case "$(cat "$STAMP")" in "trixie minbase + "*) true ;; *) false ;; esac &&
    { [ -L "$ROOT_DIR/usr/bin/swift" ] || [ -x "$ROOT_DIR/usr/bin/swift" ]; }; then
    echo "swift root: adding packages ($PACKAGES)"
    mount_fs
    if in_root apt-get update -qq && in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends $PACKAGES > "$REPO/build/swift-root.apt.log" 2>&1; then
      in_root apt-get clean
      echo "$STAMP_TEXT" > "$STAMP"
      return 0
    fi
    echo "swift root: adding packages failed; rebuilding the root"
  fi
  if ! command -v debootstrap >/dev/null; then
    command -v apt-get >/dev/null || cannot "no debootstrap and no apt-get to install it"
    echo "installing debootstrap"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; } \
      >/dev/null 2>&1 || cannot "no debootstrap, and apt-get could not install it"
  fi
  local m t0=$SECONDS
  m=$(mirror)
  # A quick probe, so that an offline machine gets a clear reason instead of a debootstrap log.
  if command -v curl >/dev/null; then
    curl -fsS -m 20 -o /dev/null "$m/dists/trixie/Release" || cannot "no network to Debian ($m)"
  fi
  rm -f "$STAMP"
  if [ -e "$ROOT_DIR" ]; then
    # Never delete through a bind mount of the host's /dev.
    for d in proc dev; do mountpoint -q "$ROOT_DIR/$d" && umount -l "$ROOT_DIR/$d"; done
    rm -rf --one-file-system "$ROOT_DIR"
  fi
  mkdir -p "$ROOT_DIR"
  echo "swift root: debootstrap trixie from $m"
  debootstrap --variant=minbase trixie "$ROOT_DIR" "$m" > "$REPO/build/swift-root.debootstrap.log" 2>&1 ||
    { tail -n 20 "$REPO/build/swift-root.debootstrap.log"; echo "debootstrap failed"; exit 1; }
  echo "swift root: base in $((SECONDS - t0))s; installing $PACKAGES"
  mount_fs
  in_root apt-get update -qq
  in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    $PACKAGES > "$REPO/build/swift-root.apt.log" 2>&1 ||
    { tail -n 20 "$REPO/build/swift-root.apt.log"; echo "apt-get install in the root failed"; exit 1; }
  in_root apt-get clean
  echo "$STAMP_TEXT" > "$STAMP"
  echo "swift root: ready in $((SECONDS - t0))s ($(in_root swift --version 2>&1 | head -n1))"
}

# The library goes into the root as a user installs it: scripts/install.sh, staged with
# DESTDIR under the root's /usr/local (where pkg-config and the loader look by default).
install_library() {
  DESTDIR="$ROOT_DIR" scripts/install.sh --prefix /usr/local --libdir lib
  in_root ldconfig
}

# Sources are copied fresh each run; the package's .build stays in the root between runs.
copy_package() {
  local dst=$ROOT_DIR$PKG_DIR
  mkdir -p "$dst"
  find "$dst" -mindepth 1 -maxdepth 1 ! -name .build -exec rm -rf {} +
  (cd bindings/swift && tar --exclude=./.build -cf - .) | (cd "$dst" && tar -xf -)
}

# The README's Swift quickstart, built as written as an executable in a scratch package that
# depends on the Agentao package, and run.
readme_quickstart() {
  local dst=$ROOT_DIR/src/readme-quickstart
  mkdir -p "$dst/Sources/Quickstart"
  awk '/^## Quickstart in Swift/{q=1} q&&/^```swift$/{c=1;next} c&&/^```$/{exit} c' README.md \
    > "$dst/Sources/Quickstart/main.swift"
  [ -s "$dst/Sources/Quickstart/main.swift" ] || { echo "no Swift quickstart in README.md"; exit 1; }
  cat > "$dst/Package.swift" <<'EOF'
// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Quickstart",
    dependencies: [.package(path: "/src/agentao-swift")],
    targets: [
        .executableTarget(name: "Quickstart", dependencies: [.product(name: "Agentao", package: "agentao-swift")]),
    ]
)
EOF
  in_root sh -c "cd /src/readme-quickstart && swift build -Xswiftc -warnings-as-errors 2>&1" | grep -v '^\['
  in_root sh -c "cd /src/readme-quickstart && exec timeout -k 10 60 .build/debug/Quickstart" | tee "$REPO/build/swift-readme.out"
  grep -qx 'Hello from the agent.' "$REPO/build/swift-readme.out" ||
    { echo "the README Swift quickstart did not print the answer"; exit 1; }
}

# The docs' Swift recipe (docs/new-project.md), as a SwiftPM user takes it: a git repository
# of the repository's root manifest and Swift sources, tagged with the library's version, is
# the git URL of the recipe's `dependencies:` line (the placeholder URL replaced by its
# file:// path, as the Go recipe's proxy replaces the module host); the recipe's manifest
# lines are used as written, and the package builds and runs the README's quickstart.
git_url_recipe() {
  local src=$ROOT_DIR/src/libagentao dst=$ROOT_DIR/src/git-url-recipe version lines
  version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
  rm -rf "$src" "$dst" && mkdir -p "$src" "$dst/Sources/App"
  tar -cf - Package.swift bindings/swift/Sources | (cd "$src" && tar -xf -)
  git -C "$src" init -q
  git -C "$src" add -A
  git -C "$src" -c user.name=recipe -c user.email=recipe@localhost commit -qm "libagentao $version"
  git -C "$src" tag "$version"
  lines=$(awk '/^## Swift/{q=1} q&&/^```text$/{c=1;next} c&&/^```$/{exit} c' docs/new-project.md)
  printf '%s\n' "$lines" | grep -q "from: \"$version\"" ||
    { echo "the Swift recipe in docs/new-project.md does not ask for version $version"; exit 1; }
  cp "$ROOT_DIR/src/readme-quickstart/Sources/Quickstart/main.swift" "$dst/Sources/App/main.swift"
  {
    printf '// swift-tools-version:6.0\nimport PackageDescription\n\nlet package = Package(\n    name: "App",\n'
    printf '%s\n' "$lines" | sed 's|https://github.com/agentao/libagentao.git|file:///src/libagentao|; s/^/    /'
    printf ')\n'
  } > "$dst/Package.swift"
  in_root sh -c "cd /src/git-url-recipe && swift build -Xswiftc -warnings-as-errors 2>&1" | grep -v '^\['
  in_root sh -c "cd /src/git-url-recipe && exec timeout -k 10 60 .build/debug/App" | tee "$REPO/build/swift-git-url.out"
  grep -qx 'Hello from the agent.' "$REPO/build/swift-git-url.out" ||
    { echo "the Swift recipe (git URL and tag) did not build and run the quickstart"; exit 1; }
}

run_tests() {
  install_library
  copy_package
  echo "swift build (Swift 6 language mode, warnings as errors)"
  in_root sh -c "cd $PKG_DIR && swift build --build-tests -Xswiftc -warnings-as-errors 2>&1"
  echo "swift test"
  in_root timeout -k 10 600 sh -c "cd $PKG_DIR && swift test --skip-build 2>&1"
  echo "README Swift quickstart"
  readme_quickstart
  echo "the Swift recipe: a git URL and a version tag"
  git_url_recipe
}

[ "$(id -u)" = 0 ] || cannot "not root (debootstrap, mount and chroot need root)"
# One run at a time: the test command may have started `setup` in the background, and this
# waits for it.
mkdir -p "$REPO/build"
exec 9> "$REPO/build/swift-root.lock"
flock 9
case "${1:-all}" in
  setup) setup_root ;;
  shell) setup_root; mount_fs; chroot "$ROOT_DIR" /bin/bash ;;
  all) setup_root; mount_fs; run_tests ;;
  *) echo "usage: $0 [setup|shell]" >&2; exit 2 ;;
esac
