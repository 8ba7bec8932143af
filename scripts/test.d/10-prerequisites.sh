step "prerequisites"
# python3: tests/hooks.rs runs Python hook scripts, as users write them.
apt_need build-essential cmake pkg-config libsqlite3-dev python3
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)"; exit 1; }
rustup component list --installed 2>/dev/null | grep -q rustfmt || rustup component add rustfmt clippy >/dev/null 2>&1 || true

# The Swift step's Debian 13 root (scripts/swift-root.sh) is minutes of downloading and little
# CPU: start it now, in the background, while the Rust and C steps build. The Swift step waits
# for it through the script's lock. debootstrap is installed here, in the foreground, so that no
# two apt-gets run at once on this machine.
if want_step 90-swift.sh && [ "$(id -u)" = 0 ] && apt_need debootstrap; then
  echo "starting the Swift root setup in the background (log: build/swift-setup.log)"
  nohup scripts/swift-root.sh setup > build/swift-setup.log 2>&1 < /dev/null &
fi

# Jaeger for the OpenTelemetry step is a Go build of ~1,500 packages the first time on a machine
# (minutes of CPU): start it now, niced, so it takes the cores the single-threaded steps leave
# idle. The OpenTelemetry step waits for it through the script's lock.
if want_step 89-otel.sh && [ ! -x build/go-tools/jaeger ]; then
  echo "building Jaeger in the background, niced (log: build/jaeger-prebuild.log)"
  mkdir -p build/jaeger
  nohup nice -n 19 scripts/jaeger.sh build > build/jaeger-prebuild.log 2>&1 < /dev/null &
fi

# The release library (the C++, Go, examples, install, fleet and Swift steps link it) is ~7
# minutes of compiling on 2 cores when target/ is cold, and the steps before them leave a core
# idle for minutes (test binaries waiting on servers and timers, Miri's one thread): build it
# now, niced, so it takes those. The first step that needs it waits through cargo's own lock on
# target/release (a debug build meanwhile does not wait: that lock is per profile).
if want_step 55-cpp.sh || want_step 57-go.sh || want_step 80-install.sh; then
  echo "building the release library in the background, niced (log: build/release-prebuild.log)"
  nohup nice -n 19 cargo build --release -p agentao -p agentao-acp -p mock-openai \
    > build/release-prebuild.log 2>&1 < /dev/null &
fi

# Miri (step 35) interprets on one thread for minutes: start it now, niced, beside the Rust
# step's compiling and test binaries; step 35 waits for it and reports it.
if want_step 35-miri.sh; then
  echo "starting Miri in the background, niced (log: build/miri.log)"
  start_background build/miri.pid build/miri.log nice -n 19 scripts/miri.sh
fi
