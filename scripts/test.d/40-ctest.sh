step "C tests (ctest)"
cmake -S tests/c -B build/c -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build/c --parallel 2 >/dev/null
# Two at a time (as under valgrind and TSan): the tests mostly wait on their mock servers.
ctest --test-dir build/c --output-on-failure --timeout 120 -j2 | tee build/ctest.log
record "C tests" "$(grep -ohE 'tests passed, 0 tests failed out of [0-9]+' build/ctest.log | awk '{print $NF}')"
