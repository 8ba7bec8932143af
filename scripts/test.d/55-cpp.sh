step "C++ binding tests (GoogleTest under ctest)"
apt_need g++ cmake libgtest-dev
cmake -S tests/cpp -B build/cpp -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build/cpp --parallel 2 >/dev/null
ctest --test-dir build/cpp --output-on-failure --timeout 120 | tee build/ctest-cpp.log
record "C++ tests" "$(grep -ohE 'tests passed, 0 tests failed out of [0-9]+' build/ctest-cpp.log | awk '{print $NF}')"

# bench/run.sh --only bindings' C++ worker keeps compiling against the binding.
c++ -std=c++17 -Wall -Wextra -Werror -Iinclude -Ibindings/cpp -fsyntax-only bench/bindings/worker.cpp

step "C++ binding tests under ASan+UBSan (ctest)"
cmake -S tests/cpp -B build/cpp-asan -DCMAKE_BUILD_TYPE=Debug -DAGENTAO_SANITIZE=ON >/dev/null
cmake --build build/cpp-asan --parallel 2 >/dev/null
ctest --test-dir build/cpp-asan --output-on-failure --timeout 180 | tee build/ctest-cpp-asan.log
record "C++ tests (ASan+UBSan)" "$(grep -ohE 'tests passed, 0 tests failed out of [0-9]+' build/ctest-cpp-asan.log | awk '{print $NF}')"

step "README C++ quickstart compiles as written"
mkdir -p build/examples
awk '/^## Quickstart/{q=1} q&&/^```cpp$/{c=1;next} c&&/^```$/{exit} c' README.md > build/examples/readme_quickstart.cpp
[ -s build/examples/readme_quickstart.cpp ] || { echo "README has no C++ quickstart"; exit 1; }
c++ -std=c++17 -Wall -Wextra -Werror -Iinclude -Ibindings/cpp build/examples/readme_quickstart.cpp \
  -Ltarget/debug -Wl,-rpath,"$PWD/target/debug" -lagentao -o build/examples/readme_quickstart_cpp
(cd build/examples && ./readme_quickstart_cpp) | tee build/examples/readme_cpp.out
grep -qx 'Hello from the agent.' build/examples/readme_cpp.out
# The README's own build-and-run line, verbatim, from a folder outside the checkout.
cargo build --release --quiet
readme_line 'c++ -std=c++17 -I"$REPO/include"' build/examples/readme_quickstart.cpp quickstart.cpp \
  | tee build/examples/readme_cpp_line.out
grep -qx 'Hello from the agent.' build/examples/readme_cpp_line.out
record "README C++ quickstart" 2

step "docs/bindings.md C++ snippets compile with -Werror"
# Each ```cpp block becomes a function body (an inner scope, so it may declare its own
# `agent`); `{ ... }` stands for the host's code. Compiled, not run: the snippets are fragments.
snip=build/examples/bindings_snippets.cpp
{
  echo '#include <string>'; echo '#include <thread>'; echo '#include "agentao.hpp"'
  awk '/^```cpp$/{n++; print "void snippet_" n "(agentao::agent& agent, const std::string& config_json) {"; print "(void)agent; (void)config_json; {"; c=1; next}
       c&&/^```$/{print "}}"; c=0; next}
       c{gsub(/\{ \.\.\. \}/, "{}"); print}' docs/bindings.md
} > "$snip"
n_snippets=$(grep -c '^void snippet_' "$snip")
[ "$n_snippets" -ge 2 ] || { echo "docs/bindings.md: only $n_snippets C++ snippets found"; exit 1; }
c++ -std=c++17 -Wall -Wextra -Werror -Wno-unused-parameter -Iinclude -Ibindings/cpp -c "$snip" \
  -o build/examples/bindings_snippets.o
record "docs C++ snippets compiled" "$n_snippets"
