package agentao

import (
	"context"
	"testing"
	"time"
)

func countYields(t *testing.T) *int {
	n := new(int)
	gosched = func() { *n++ }
	t.Cleanup(func() { gosched = runtimeGosched })
	return n
}

// A run of turns back to back yields once every yieldEvery, not once a turn.
func TestARunOfTurnsYieldsOnceEveryYieldEvery(t *testing.T) {
	n := countYields(t)
	var y sysmonYield
	start := int64(time.Hour)
	const turn = int64(7 * time.Microsecond)
	now := start
	for ; now < start+int64(4*yieldEvery)-turn; now += turn {
		y.turnEndedAt(now)
	}
	if *n != 3 {
		t.Fatalf("%d yields in a run of %v, want 3", *n, time.Duration(now-start))
	}
}

// A gap between two turns starts a new run: turns with gaps never yield.
func TestTurnsWithGapsDoNotYield(t *testing.T) {
	n := countYields(t)
	var y sysmonYield
	for now := int64(time.Hour); now < int64(time.Hour+4*yieldEvery); now += int64(runGap) + 1 {
		y.turnEndedAt(now)
	}
	if *n != 0 {
		t.Fatalf("%d yields, want none", *n)
	}
}

// Each Chat ends through its agent's limiter.
func TestChatEndsThroughTheYieldLimiter(t *testing.T) {
	a, err := New(benchConfig(t.TempDir(), `{"text":"hello"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for range 2 {
		before := a.yielded.lastEnd.Load()
		if _, err := a.Chat(context.Background(), "go"); err != nil {
			t.Fatal(err)
		}
		if a.yielded.lastEnd.Load() <= before {
			t.Fatal("the turn's end was not recorded")
		}
	}
}
