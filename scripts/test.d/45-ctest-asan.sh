step "C tests under AddressSanitizer (ctest)"
cmake -S tests/c -B build/c-asan -DCMAKE_BUILD_TYPE=Debug -DAGENTAO_SANITIZE=ON >/dev/null
cmake --build build/c-asan --parallel 2 >/dev/null
ctest --test-dir build/c-asan --output-on-failure --timeout 180 -j2 | tee build/ctest-asan.log
record "C tests (ASan+UBSan)" "$(grep -ohE 'tests passed, 0 tests failed out of [0-9]+' build/ctest-asan.log | awk '{print $NF}')"
