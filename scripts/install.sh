#!/usr/bin/env bash
# Installs libagentao like a C library (what `cargo cinstall` would, see docs/bindings.md):
#
#   scripts/install.sh --prefix /usr/local [--libdir lib] [--no-build] [--debug-info] [--acp]
#
#   <prefix>/include/agentao.h, agentao.hpp,      the C header, the C++ binding and its
#     agentao_events.hpp                          generated host-event names
#   <libdir>/libagentao.so.X.Y.Z (+ SONAME link libagentao.so.0.MINOR, + libagentao.so)
#   <libdir>/libagentao.a
#   <libdir>/pkgconfig/agentao.pc                 (Libs.private: the static link's system libs)
#   <libdir>/cmake/agentao/agentaoConfig.cmake    find_package(agentao CONFIG):
#                                                 agentao::agentao, agentao::agentao_static
#   <prefix>/bin/agentao-acp                      with --acp: the ACP server (docs/acp.md)
#
# --libdir is relative to the prefix (default lib). DESTDIR is honoured for staging.
# --no-build installs what target/release already holds.
# The installed libraries are stripped (the release profile keeps line tables, which make
# target/release/libagentao.so several times larger). --debug-info (or AGENTAO_INSTALL_DEBUG=1)
# also installs the shared library's debug info beside it, <libdir>/.debug/libagentao.so.X.Y.Z.debug,
# linked by .gnu_debuglink, where gdb looks for it. The build's progress is shown (cargo's own
# lines); the sizes installed are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix="" libdir="lib" build=1 debug_info=0 acp=0
case "${AGENTAO_INSTALL_DEBUG:-}" in 1|yes|true) debug_info=1 ;; esac
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
    --prefix=*) prefix="${1#*=}"; shift ;;
    --libdir) libdir="${2:?--libdir needs a directory}"; shift 2 ;;
    --libdir=*) libdir="${1#*=}"; shift ;;
    --no-build) build=0; shift ;;
    --debug-info) debug_info=1; shift ;;
    --acp) acp=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$prefix" ] || { echo "usage: scripts/install.sh --prefix DIR [--libdir lib] [--no-build] [--debug-info] [--acp]" >&2; exit 2; }
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac
case "$libdir" in /*|*..*) echo "install.sh: --libdir must be relative to the prefix" >&2; exit 2 ;; esac
[ "$(uname -s)" = Linux ] || { echo "install.sh: only Linux is supported so far" >&2; exit 2; }

target_dir="${CARGO_TARGET_DIR:-target}"
for tool in strip objcopy readelf; do
  command -v "$tool" >/dev/null || { echo "install.sh: $tool is missing (Debian: apt-get install binutils)" >&2; exit 1; }
done
if [ $build = 1 ]; then
  # Progress: cargo's own lines. A cold release build compiles ~250 crates (minutes on a
  # small machine); an up-to-date one returns at once.
  packages=(-p agentao)
  [ $acp = 1 ] && packages+=(-p agentao-acp)
  echo "install.sh: building (cargo build --release ${packages[*]})"
  cargo build --release "${packages[@]}"
fi
acp_bin="$target_dir/release/agentao-acp"
[ $acp = 0 ] || [ -x "$acp_bin" ] || { echo "install.sh: $acp_bin is missing (drop --no-build)" >&2; exit 1; }
so="$target_dir/release/libagentao.so"
a="$target_dir/release/libagentao.a"
[ -f "$so" ] && [ -f "$a" ] || { echo "install.sh: $so or $a is missing (drop --no-build)" >&2; exit 1; }

# The version and SONAME come from the header the library was built with (tests/header.rs keeps
# include/agentao.h equal to the generated one), with the policy build.rs applies.
macro() { awk -v m="$1" '$1 == "#define" && $2 == m {gsub(/"/, "", $3); print $3}' include/agentao.h; }
major=$(macro AGENTAO_VERSION_MAJOR) minor=$(macro AGENTAO_VERSION_MINOR) patch=$(macro AGENTAO_VERSION_PATCH)
version="$major.$minor.$patch"
if [ "$major" = 0 ]; then soname="libagentao.so.0.$minor"; else soname="libagentao.so.$major"; fi
actual=$(readelf -d "$so" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$actual" = "$soname" ] || { echo "install.sh: $so has SONAME '$actual', want '$soname'" >&2; exit 1; }

# What a static link needs besides libagentao.a: the Rust standard library's system libraries.
# No dependency adds one (ring's C code is bundled in the archive), so rustc's answer for an
# empty staticlib is the library's answer, without recompiling the crate.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
: > "$probe/probe.rs"
native_libs=$(rustc --crate-type staticlib --print native-static-libs -o "$probe/libprobe.a" "$probe/probe.rs" 2>&1 \
  | sed -n 's/^note: native-static-libs: //p')
[ -n "$native_libs" ] || { echo "install.sh: rustc did not print native-static-libs" >&2; exit 1; }

dest="${DESTDIR:-}$prefix"
inc="$dest/include" lib="$dest/$libdir"
install -d "$inc" "$lib/pkgconfig" "$lib/cmake/agentao"
install -m 644 include/agentao.h bindings/cpp/agentao.hpp bindings/cpp/agentao_events.hpp "$inc/"
# Stripped copies (in the probe folder, removed on exit): the shared library keeps only what
# dynamic linking needs, the archive keeps its symbols (a static link resolves them) and loses
# its debug sections.
echo "install.sh: stripping"
strip --strip-unneeded -o "$probe/libagentao.so" "$so"
strip --strip-debug -o "$probe/libagentao.a" "$a"
install -m 755 "$probe/libagentao.so" "$lib/libagentao.so.$version"
ln -sfn "libagentao.so.$version" "$lib/$soname"
ln -sfn "$soname" "$lib/libagentao.so"
install -m 644 "$probe/libagentao.a" "$lib/libagentao.a"
if [ $acp = 1 ]; then
  install -d "$dest/bin"
  strip --strip-unneeded -o "$probe/agentao-acp" "$acp_bin"
  install -m 755 "$probe/agentao-acp" "$dest/bin/agentao-acp"
fi
if [ $debug_info = 1 ]; then
  install -d "$lib/.debug"
  objcopy --only-keep-debug "$so" "$lib/.debug/libagentao.so.$version.debug"
  chmod 644 "$lib/.debug/libagentao.so.$version.debug"
  # The link names the debug file; objcopy records its CRC, so gdb takes only this one.
  (cd "$lib/.debug" && objcopy --add-gnu-debuglink="libagentao.so.$version.debug" "$lib/libagentao.so.$version")
elif [ -e "$lib/.debug/libagentao.so.$version.debug" ]; then
  rm -f "$lib/.debug/libagentao.so.$version.debug"
fi

cat > "$lib/pkgconfig/agentao.pc" <<EOF
prefix=$prefix
libdir=\${prefix}/$libdir
includedir=\${prefix}/include

Name: agentao
Description: Embed a governed LLM agent in a native program (C ABI)
Version: $version
Libs: -L\${libdir} -lagentao
Libs.private: $native_libs
Cflags: -I\${includedir}
EOF

# The CMake package finds its prefix from its own location, so a staged or moved tree works.
up=$(echo "$libdir/cmake/agentao" | awk -F/ '{s=""; for (i = 1; i <= NF; i++) if ($i != "" && $i != ".") s = s "/.."; print substr(s, 2)}')
cmake_libs=$(for l in $native_libs; do printf '%s;' "${l#-l}"; done)
cat > "$lib/cmake/agentao/agentaoConfig.cmake" <<EOF
# CMake package of libagentao $version (written by scripts/install.sh).
#   find_package(agentao CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE agentao::agentao)          # shared
#   target_link_libraries(app PRIVATE agentao::agentao_static)   # static, with its system libs
# Both targets carry the include directory (agentao.h, and agentao.hpp for C++17).
get_filename_component(_agentao_prefix "\${CMAKE_CURRENT_LIST_DIR}/$up" ABSOLUTE)
set(_agentao_libdir "\${_agentao_prefix}/$libdir")
if(NOT TARGET agentao::agentao)
  add_library(agentao::agentao SHARED IMPORTED)
  set_target_properties(agentao::agentao PROPERTIES
    IMPORTED_LOCATION "\${_agentao_libdir}/libagentao.so.$version"
    IMPORTED_SONAME "$soname"
    INTERFACE_INCLUDE_DIRECTORIES "\${_agentao_prefix}/include")
endif()
if(NOT TARGET agentao::agentao_static)
  add_library(agentao::agentao_static STATIC IMPORTED)
  set_target_properties(agentao::agentao_static PROPERTIES
    IMPORTED_LOCATION "\${_agentao_libdir}/libagentao.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES "C"
    INTERFACE_INCLUDE_DIRECTORIES "\${_agentao_prefix}/include"
    INTERFACE_LINK_LIBRARIES "$cmake_libs")
endif()
set(agentao_INCLUDE_DIR "\${_agentao_prefix}/include")
unset(_agentao_prefix)
unset(_agentao_libdir)
EOF

cat > "$lib/cmake/agentao/agentaoConfigVersion.cmake" <<EOF
# Before 1.0 each minor release may change the ABI, so only the same MAJOR.MINOR (and a
# PATCH at least the one asked for) is compatible; from 1.0 the same MAJOR.
set(PACKAGE_VERSION "$version")
set(PACKAGE_VERSION_COMPATIBLE FALSE)
if(NOT PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
elseif(NOT PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION
   AND PACKAGE_FIND_VERSION_MAJOR STREQUAL "$major"
   AND ("$major" STREQUAL "0" AND PACKAGE_FIND_VERSION_MINOR STREQUAL "$minor" OR NOT "$major" STREQUAL "0"))
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
  set(PACKAGE_VERSION_EXACT TRUE)
endif()
if(NOT CMAKE_SIZEOF_VOID_P STREQUAL "8")
  set(PACKAGE_VERSION "\${PACKAGE_VERSION} (64-bit)")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
endif()
EOF

echo "installed libagentao $version (SONAME $soname) into ${DESTDIR:-}$prefix"
sizes=("$lib/libagentao.so.$version" "$lib/libagentao.a")
[ $debug_info = 1 ] && sizes+=("$lib/.debug/libagentao.so.$version.debug")
[ $acp = 1 ] && sizes+=("$dest/bin/agentao-acp")
for f in "${sizes[@]}"; do
  printf '  %-48s %6.1f MB\n' "${f#"$dest"/}" "$(awk -v b="$(stat -c %s "$f")" 'BEGIN {print b / 1e6}')"
done
