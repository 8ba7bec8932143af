step "the wires against the official Python SDKs (anthropic, openai): the mock's streams and the library's request bodies"
sdk_dir=build/wires-sdk
if ! command -v python3 >/dev/null; then
  apt_need python3 python3-venv || true
fi
if ! command -v python3 >/dev/null; then
  skipped "wires-sdk: python3 is not installed (and could not be installed here)"
elif ! { [ -x "$sdk_dir/venv/bin/python" ] || python3 -m venv "$sdk_dir/venv"; }; then
  skipped "wires-sdk: python3 cannot make a virtual environment (python3-venv missing)"
elif ! "$sdk_dir/venv/bin/pip" install --quiet --disable-pip-version-check \
    -r tests/wires-sdk/requirements.txt; then
  skipped "wires-sdk: anthropic and openai could not be installed from PyPI (unreachable?)"
else
  # The request bodies the library sends in tests/wires.rs, for the SDKs' request types.
  rm -rf "$sdk_dir/bodies"
  AGENTAO_WIRE_BODIES="$PWD/$sdk_dir/bodies" cargo test --features "$AGENTAO_TEST_FEATURES" --quiet --test wires
  cargo build --features "$AGENTAO_TEST_FEATURES" --quiet -p mock-openai
  "$sdk_dir/venv/bin/python" tests/wires-sdk/check.py "$PWD/target/debug/mock-openai" \
    tests/conformance/transcripts "$sdk_dir/bodies" | tee "$sdk_dir/out.txt"
  record "wires-sdk" "$(sed -nE 's/^wires-sdk: ([0-9]+) passed, 0 failed$/\1/p' "$sdk_dir/out.txt")"
fi
