step "install into build/prefix; a C consumer via pkg-config and CMake, shared and static"
apt_need pkg-config cmake binutils
prefix="$ROOT/build/prefix"
out="$ROOT/build/install"
rm -rf "$prefix" "$out"
mkdir -p "$out/ws"
scripts/install.sh --prefix "$prefix" --libdir lib --acp
lib="$prefix/lib"
ver=$(awk '$2 == "AGENTAO_VERSION" {gsub(/"/, "", $3); print $3}' include/agentao.h)
major=${ver%%.*} rest=${ver#*.} minor=${rest%%.*}
soname="libagentao.so.$major.$minor"; [ "$major" = 0 ] || soname="libagentao.so.$major"
dyn=$(readelf -d "$lib/libagentao.so.$ver")
grep -F "Library soname: [$soname]" <<<"$dyn"
[ "$(readlink "$lib/$soname")" = "libagentao.so.$ver" ] && [ "$(readlink "$lib/libagentao.so")" = "$soname" ]
for file in include/agentao.h include/agentao.hpp lib/libagentao.a lib/pkgconfig/agentao.pc \
         lib/cmake/agentao/agentaoConfig.cmake lib/cmake/agentao/agentaoConfigVersion.cmake; do
  [ -f "$prefix/$file" ] || { echo "not installed: $file"; exit 1; }
done
grep -q '^Libs.private: .*-lpthread' "$lib/pkgconfig/agentao.pc"
# Stripped: no debug sections in either library; the debug info only on request, beside it.
for f in "$lib/libagentao.so.$ver" "$lib/libagentao.a"; do
  sections=$(readelf -S -W "$f")
  if grep -qE '\] \.debug_' <<<"$sections"; then echo "$f is not stripped"; exit 1; fi
done
[ ! -e "$lib/.debug" ] || { echo "debug info installed without --debug-info"; exit 1; }
scripts/install.sh --prefix "$ROOT/build/prefix-debug" --no-build --debug-info
dbg_lib="$ROOT/build/prefix-debug/lib"
sections=$(readelf -S -W "$dbg_lib/.debug/libagentao.so.$ver.debug")
grep -q '\.debug_line' <<<"$sections"
debuglink=$(readelf --string-dump=.gnu_debuglink "$dbg_lib/libagentao.so.$ver")
[ "$(awk '/\[/ {print $3; exit}' <<<"$debuglink")" = "libagentao.so.$ver.debug" ]
rm -rf "$ROOT/build/prefix-debug"
du -b "$lib/libagentao.so.$ver" "$lib/libagentao.a" | awk '{printf "installed %s: %.1f MB\n", $2, $1 / 1e6}'

# One build serves the workspace: building the ACP server and the mock server (as the docs
# say) leaves the library fresh for the next `cargo build --release` (scripts/demo.sh's).
cargo build --release -p agentao-acp -p mock-openai
cargo build --release -v 2> "$out/rebuild.log"
grep -q 'Fresh agentao v' "$out/rebuild.log" \
  || { grep -E 'Compiling|Dirty|Running' "$out/rebuild.log" | head -20; echo "the library was rebuilt after agentao-acp"; exit 1; }

# check_consumer EXE LINKAGE: runs it and checks its output and how it is linked.
check_consumer() {
  # (Outputs are captured before grep -q, which would SIGPIPE the producer under pipefail.)
  local exe=$1 linkage=$2 dyn libs
  "$exe" "$out/ws" | tee "$exe.out"
  grep -qx 'answer: installed and working' "$exe.out"
  grep -qx 'events: yes' "$exe.out"
  grep -qx "version: $ver" "$exe.out"
  dyn=$(readelf -d "$exe")
  if [ "$linkage" = shared ]; then
    libs=$(ldd "$exe")
    grep -qF "Shared library: [$soname]" <<<"$dyn"
    grep -qF "$lib/$soname" <<<"$libs"
  else
    if grep -q 'libagentao' <<<"$dyn"; then echo "$exe depends on a shared libagentao"; exit 1; fi
  fi
}

# pkg-config sees only the installed copy.
export PKG_CONFIG_LIBDIR="$lib/pkgconfig"
[ "$(pkg-config --modversion agentao)" = "$ver" ]
CC=${CC:-cc}
# shellcheck disable=SC2046
$CC -std=c11 -Wall -Wextra -Werror tests/install/consumer.c $(pkg-config --cflags --libs agentao) \
  -Wl,-rpath,"$lib" -o "$out/pc_shared"
check_consumer "$out/pc_shared" shared
# Static: the archive by name, then the system libraries from Libs.private.
static_libs=$(pkg-config --static --libs-only-l agentao | tr ' ' '\n' | grep -vx -- '-lagentao' | tr '\n' ' ')
# shellcheck disable=SC2046,SC2086
$CC -std=c11 -Wall -Wextra -Werror tests/install/consumer.c $(pkg-config --cflags agentao) \
  "$(pkg-config --variable=libdir agentao)/libagentao.a" $static_libs -o "$out/pc_static"
check_consumer "$out/pc_static" static
# The installed C++ binding: the README's C++ quickstart against the installed headers.
awk '/^## Quickstart/{q=1} q&&/^```cpp$/{c=1;next} c&&/^```$/{exit} c' README.md > "$out/quickstart.cpp"
# shellcheck disable=SC2046
c++ -std=c++17 -Wall -Wextra -Werror "$out/quickstart.cpp" $(pkg-config --cflags --libs agentao) \
  -Wl,-rpath,"$lib" -o "$out/cpp_shared"
(cd "$out/ws" && "$out/cpp_shared") > "$out/cpp_shared.out"
grep -qx 'Hello from the agent.' "$out/cpp_shared.out"
unset PKG_CONFIG_LIBDIR

cmake -S tests/install -B "$out/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  -DAGENTAO_WANT_VERSION="$major.$minor" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$out/cmake" --parallel 2 >/dev/null
check_consumer "$out/cmake/consumer_shared" shared
check_consumer "$out/cmake/consumer_static" static
# An incompatible version is refused by the version file.
if cmake -S tests/install -B "$out/cmake-bad" -DCMAKE_PREFIX_PATH="$prefix" \
     -DAGENTAO_WANT_VERSION="$major.$((minor + 1))" >/dev/null 2>&1; then
  echo "find_package accepted agentao $major.$((minor + 1))"; exit 1
fi
record "install consumers (C: pkg-config/CMake x shared/static; C++)" 5
