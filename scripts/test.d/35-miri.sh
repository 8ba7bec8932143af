step "Miri: the pure-Rust unit tests that can run under it"
# scripts/miri.sh says what runs and why. The prerequisites step started it in the background
# (niced, beside the Rust step); run alone, this step starts it. Either way it has 25 minutes
# from here to finish.
[ -f build/miri.pid ] || start_background build/miri.pid build/miri.log scripts/miri.sh
wait_background build/miri.pid build/miri.status 1500 Miri || { tail -n 60 build/miri.log; exit 1; }
miri_status=$(cat build/miri.status)
grep -E '^(test result|error|failures)' build/miri.log || true
if [ "$miri_status" = 3 ]; then
  skipped "Miri: $(grep -m1 '^unavailable:' build/miri.log | sed 's/^unavailable: //')"
elif [ "$miri_status" -ne 0 ]; then
  tail -n 60 build/miri.log; echo "Miri failed (status $miri_status)"; exit 1
else
  record "Miri unit tests" "$(grep -oE '^test result: ok\. [0-9]+ passed' build/miri.log | awk '{s+=$4} END {print s+0}')"
fi
