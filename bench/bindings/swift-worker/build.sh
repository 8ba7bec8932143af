#!/bin/sh
# Builds the Swift worker of `bench --only bindings` (called by bench/run.sh, from the
# repository's root, after the release library is built). Swift runs only inside the Debian 13
# root of scripts/swift-root.sh (build/swift-root), so the worker is built and run there:
#
#   - the release library, its header and an agentao.pc go to a directory of this checkout's
#     own in the root (/src/bench-bindings-<checksum of the checkout's path>: checkouts sharing
#     one root do not overwrite each other, and the root's /usr/local, which the Swift tests
#     install into, is left alone), with bindings/swift and this package beside them;
#   - `swift build -c release` runs there in a mount namespace of its own (unshare), with /proc
#     and /dev mounted in it: the root's own mounts, which the Swift test step makes and
#     removes, are never touched;
#   - target/bench/bind-swift is a launcher that starts the worker the same way, with the
#     host's /tmp mounted over the root's (the bench's workspace is there).
#
# When the worker cannot be built here it prints why, writes the reason to
# target/bench/bind-swift.skipped (the bench prints it) and exits 0: the Swift rows are skipped.
set -eu
REPO=$(pwd)
LAUNCHER=$REPO/target/bench/bind-swift
SKIPPED=$LAUNCHER.skipped
rm -f "$LAUNCHER" "$SKIPPED"
skip() {
  echo "bindings: Swift skipped: $*"
  echo "$*" > "$SKIPPED"
  exit 0
}
[ "$(id -u)" = 0 ] || skip "not root (the Debian 13 root needs mount and chroot)"
ROOT_DIR=$(readlink -f build/swift-root 2>/dev/null || true)
[ -n "$ROOT_DIR" ] && { [ -L "$ROOT_DIR/usr/bin/swift" ] || [ -x "$ROOT_DIR/usr/bin/swift" ]; } ||
  skip "no Swift root at build/swift-root (scripts/swift-root.sh setup makes it)"
command -v unshare >/dev/null || skip "no unshare (util-linux) for the root's mount namespace"

DIR=/src/bench-bindings-$(printf %s "$REPO" | cksum | cut -d' ' -f1)
D=$ROOT_DIR$DIR
mkdir -p "$D/lib" "$D/include" "$D/pkgconfig" "$D/bindings/swift" "$D/bench/bindings/swift-worker"
# A hard link, not a copy: the release library is ~160 MB with its debug info.
ln -f target/release/libagentao.so "$D/lib/libagentao.so.0.1" 2>/dev/null ||
  cp target/release/libagentao.so "$D/lib/libagentao.so.0.1"
ln -sf libagentao.so.0.1 "$D/lib/libagentao.so"
cp include/agentao.h "$D/include/"
cat > "$D/pkgconfig/agentao.pc" <<PC
Name: agentao
Description: libagentao (this checkout's release build, for the bench)
Version: 0
Libs: -L$DIR/lib -lagentao
Cflags: -I$DIR/include
PC
# Sources fresh each time; each package's .build stays, so a rebuild is incremental.
for pkg in bindings/swift bench/bindings/swift-worker; do
  find "$D/$pkg" -mindepth 1 -maxdepth 1 ! -name .build -exec rm -rf {} +
  (cd "$pkg" && tar --exclude=./.build -cf - .) | (cd "$D/$pkg" && tar -xf -)
done

# In a mount namespace of our own: /proc (the toolchain finds its libraries through $ORIGIN),
# /dev, and with --tmp the host's /tmp; then chroot. Arguments: the command to run in the root.
in_root() {
  unshare --mount --propagation private sh -c '
    root=$1; shift
    mount -t proc proc "$root/proc" && mount --bind /dev "$root/dev" || exit 1
    if [ "$1" = --tmp ]; then shift; mount --bind /tmp "$root/tmp" || exit 1; fi
    exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 "$@"' \
    sh "$ROOT_DIR" "$@"
}

echo "bindings: building the Swift worker in $ROOT_DIR$DIR (swift build -c release)"
if ! in_root sh -c "cd $DIR/bench/bindings/swift-worker && PKG_CONFIG_PATH=$DIR/pkgconfig \
    swift build -c release -Xlinker -rpath -Xlinker $DIR/lib 2>&1" > target/bench/bind-swift.log; then
  tail -n 20 target/bench/bind-swift.log
  skip "swift build failed (target/bench/bind-swift.log)"
fi
WORKER=$DIR/bench/bindings/swift-worker/.build/release/bind-swift
[ -x "$ROOT_DIR$WORKER" ] || skip "swift build made no $WORKER"
cat > "$LAUNCHER" <<SH
#!/bin/sh
# Written by bench/bindings/swift-worker/build.sh: the Swift worker, in the Debian 13 root.
exec unshare --mount --propagation private sh -c '
  mount -t proc proc "\$1/proc" && mount --bind /dev "\$1/dev" && mount --bind /tmp "\$1/tmp" || exit 1
  exec chroot "\$1" /usr/bin/env -i LANG=C.UTF-8 "\$2"' sh "$ROOT_DIR" "$WORKER"
SH
chmod +x "$LAUNCHER"
echo "bindings: Swift worker ready ($LAUNCHER)"
