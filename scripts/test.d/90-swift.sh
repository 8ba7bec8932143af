step "Swift package (bindings/swift) in a Debian 13 root: swift build, swift test, README quickstart"
# scripts/swift-root.sh exits 3 when it cannot run here (not root, no debootstrap, no network
# to Debian) and says why. The root is cached under build/swift-root (cold: a few minutes).
swift_rc=0
scripts/swift-root.sh 2>&1 | tee build/swift.log | grep -vE '^(Test Case |\[[0-9]+/[0-9]+\] )' || swift_rc=$?
if [ "$swift_rc" = 3 ]; then
  skipped "Swift: $(sed -n 's/^cannot run the Swift tests here: //p' build/swift.log | tail -n1)"
elif [ "$swift_rc" != 0 ]; then
  echo "the Swift step failed (log: build/swift.log)"; exit 1
else
  record "Swift tests (XCTest)" "$(grep -A1 "^Test Suite 'All tests' passed" build/swift.log | grep -oE 'Executed [0-9]+ tests?, with 0 failures' | awk '{print $2}' | tail -n1)"
  record "README quickstart, Swift recipe (git URL + tag)" 2
fi
