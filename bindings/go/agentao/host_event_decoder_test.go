package agentao

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// conformanceExamples are the conformance suite's host events, one a line.
func conformanceExamples(t testing.TB) []string {
	b, err := os.ReadFile("testdata/host-event-examples.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// byEncodingJSON is the event as encoding/json decodes it into the type's struct, the answer
// the reflection-free decoder must give.
func byEncodingJSON(eventType string, b []byte) (HostEvent, error) {
	ev := newHostEvent(eventType)
	if err := json.Unmarshal(b, ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// Every event the library writes is read without reflection, to the same value as
// encoding/json's.
func TestHostEventDecoderReadsTheLibrarysEvents(t *testing.T) {
	for _, line := range conformanceExamples(t) {
		eventType, _ := leadingEventType(line)
		ev := newHostEvent(eventType)
		if !decodeFast(line, ev.(fastDecodable)) {
			t.Fatalf("the decoder left this event to encoding/json: %s", line)
		}
		want, err := byEncodingJSON(eventType, []byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ev, want) {
			t.Fatalf("%s:\n got %#v\nwant %#v", line, ev, want)
		}
	}
}

// Shapes the library does not write decode as encoding/json decodes them (read by the
// decoder, or left to encoding/json), errors included.
func TestHostEventDecoderAgreesWithEncodingJSONOnOtherShapes(t *testing.T) {
	tool := `{"event_type":"tool_lifecycle","session_id":"s","tool_call_id":"c","tool_name":"read_file","phase":"started","started_at":"2026-05-01T08:15:02.115Z"`
	perm := `{"event_type":"permission_decision","session_id":"s","tool_name":"t","decision_id":"d","outcome":"allow","mode":"plan","loaded_sources":["a"],"decided_at":"2026-05-01T08:15:02.114Z"`
	sub := `{"event_type":"subagent_lifecycle","session_id":"s","child_task_id":"k","phase":"spawned","started_at":"2026-05-01T08:16:00.000Z"`
	docs := []string{
		tool + `}`,
		" \n\t" + tool + "} \r\n",
		tool + `,"summary":"a \"quoted\" \u00e9 \ud83d\ude00 line\n"}`,
		tool + `,"summary":"caf` + "\xe9" + `"}`,         // invalid UTF-8: replaced
		tool + `,"summary":"` + "é ✓" + `"}`,             // valid UTF-8
		tool + `,"Summary":"by case"}`,                   // encoding/json matches keys by case
		tool + `,"SUMMARY":"by case","summary":"exact"}`, // both: the last wins
		tool + `,"summ\u0061ry":"escaped key"}`,          // an escaped key
		tool + `,"phase":null}`,                          // null leaves a string as it was
		tool + `,"summary":null,"summary":"again"}`,      // a repeated key: the last
		tool + `,"completed_at":null,"outcome":null}`,    // nulls clear pointers
		tool + `,"started_at":null}`,                     // null leaves a time as it was
		tool + `,"future":{"a":[1,-2.5e3,true,false,null,"x",{}],"b":[]}}`,
		tool + `,"phase":5}`,                // a type error
		tool + `,"started_at":"yesterday"}`, // a bad time
		tool + `,"started_at":"2026-05-01T08:15:02.115\u005a"}`,
		tool + `}x`, // trailing bytes
		tool + `,}`, // syntax errors
		tool + `,"future":01}`,
		tool + `,"future":1.}`,
		tool + `,"future":tru}`,
		tool + `,"summary":"tab	inside"}`,
		tool + `,"summary":"bad \x escape"}`,
		tool,
		perm + `}`,
		perm + `,"loaded_sources":[]}`,         // an empty list, not nil
		perm + `,"loaded_sources":null}`,       // nil
		perm + `,"loaded_sources":["a",null]}`, // a null element
		perm + `,"loaded_sources":["a" "b"]}`,
		perm + `,"matched_rule":null}`, // RawMessage("null")
		perm + `,"matched_rule":{ "tool" : "x", "n":[1, 2] }}`,
		perm + `,"matched_rule":"not an object"}`,
		perm + `,"mode":"read-only"}`,
		sub + `,"usage":null}`,
		sub + `,"usage":{"prompt_tokens":1,"completion_tokens":-2}}`,
		sub + `,"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}}`, // one struct, filled twice
		sub + `,"usage":{"prompt_tokens":1.5}}`,
		sub + `,"usage":{"prompt_tokens":1e3}}`,
		sub + `,"usage":{"prompt_tokens":99999999999999999999}}`,
		sub + `,"usage":{"prompt_tokens":"1"}}`,
		sub + `,"usage":{"Prompt_Tokens":7}}`,
		sub + `,"usage":[]}`,
		sub + `,"usage":{"prompt_tokens":null}}`,
	}
	for _, doc := range docs {
		var head struct {
			EventType string `json:"event_type"`
		}
		_ = json.Unmarshal([]byte(doc), &head)
		eventType := head.EventType
		if eventType == "" {
			eventType, _ = leadingEventType(doc)
		}
		got, gotErr := decodeHostEvent([]byte(doc))
		want, wantErr := byEncodingJSON(eventType, []byte(doc))
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("%s: error %v, encoding/json's %v", doc, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %#v\nwant %#v", doc, got, want)
		}
	}
}

// Whatever the decoder accepts, encoding/json decodes to the same value.
func FuzzHostEventDecoderMatchesEncodingJSON(f *testing.F) {
	for _, line := range conformanceExamples(f) {
		f.Add([]byte(line))
	}
	f.Add([]byte(`{"event_type":"subagent_lifecycle","usage":{"prompt_tokens":1},"usage":{"reasoning_tokens":2}}`))
	f.Add([]byte(`{"event_type":"permission_decision","matched_rule":{"a":[{}]},"loaded_sources":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, eventType := range []string{"tool_lifecycle", "permission_decision", "subagent_lifecycle"} {
			ev := newHostEvent(eventType)
			if !decodeFast(string(b), ev.(fastDecodable)) {
				continue
			}
			want, err := byEncodingJSON(eventType, b)
			if err != nil {
				t.Fatalf("%q: accepted, but encoding/json says %v", b, err)
			}
			if !reflect.DeepEqual(ev, want) {
				t.Fatalf("%q:\n got %#v\nwant %#v", b, ev, want)
			}
		}
	})
}

// A value nested deeper than the decoder reads goes to encoding/json, which reads it.
func TestHostEventDecoderLeavesDeepValuesToEncodingJSON(t *testing.T) {
	deep := strings.Repeat("[", 2000) + strings.Repeat("]", 2000)
	doc := `{"event_type":"tool_lifecycle","session_id":"s","future":` + deep + `}`
	ev := newHostEvent("tool_lifecycle")
	if decodeFast(doc, ev.(fastDecodable)) {
		t.Fatal("the decoder read a value nested 2,000 deep")
	}
	got, err := decodeHostEvent([]byte(doc))
	if err != nil || got.(*ToolLifecycleEvent).SessionID != "s" {
		t.Fatalf("%#v, %v", got, err)
	}
}

func BenchmarkDecodeHostEvent(b *testing.B) {
	lines := conformanceExamples(b)
	b.Run("decoder", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := decodeHostEvent([]byte(lines[i%len(lines)])); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			line := []byte(lines[i%len(lines)])
			eventType, _ := leadingEventType(string(line))
			if _, err := byEncodingJSON(eventType, line); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// ordinaryBytes answers as a byte-at-a-time check does, for every byte value at every position
// of a word whose other bytes are ordinary, and for words mixing bytes near the boundaries.
func TestOrdinaryBytesMatchesTheByteByByteCheck(t *testing.T) {
	special := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80 }
	check := func(w [8]byte) {
		want := true
		for _, c := range w {
			if special(c) {
				want = false
			}
		}
		if got := ordinaryBytes(binary.LittleEndian.Uint64(w[:])); got != want {
			t.Fatalf("%q: ordinaryBytes %v, want %v", w[:], got, want)
		}
	}
	for pos := range 8 {
		for c := range 256 {
			w := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
			w[pos] = byte(c)
			check(w)
		}
	}
	// Borrows: the bytes next to each boundary (0x1f/0x20, '!'/'"'/'#', '['/'\\'/']',
	// 0x7f/0x80, 0x00/0x01) in every combination over two neighbouring positions.
	edges := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', '#', '[', '\\', ']', 0x7f, 0x80, 0xff}
	for pos := range 7 {
		for _, a := range edges {
			for _, b := range edges {
				w := [8]byte{'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x'}
				w[pos], w[pos+1] = a, b
				check(w)
			}
		}
	}
}

// A string's end, escapes, control characters and non-ASCII bytes are found wherever they
// fall against the eight-byte steps.
func TestStringTokenAtEveryAlignment(t *testing.T) {
	for pad := range 17 {
		body := strings.Repeat("a", pad)
		cases := []struct {
			doc   string
			plain bool
			ok    bool
		}{
			{`"` + body + `"`, true, true},
			{`"` + body + `\"x"`, false, true},
			{`"` + body + `\u00e9"`, false, true},
			{`"` + body + "é" + `"`, false, true},
			{`"` + body + "\x01" + `"`, false, false},
			{`"` + body + `\q"`, false, false},
			{`"` + body, false, false},
		}
		for _, c := range cases {
			doc := c.doc
			if c.ok { // what follows the string is not read
				doc += ` ,"next"`
			}
			d := eventDecoder{data: []byte(doc)}
			raw, plain := d.stringToken()
			if d.failed == c.ok {
				t.Fatalf("%q: failed %v", c.doc, d.failed)
			}
			if c.ok && (string(raw) != c.doc || plain != c.plain || d.pos != len(c.doc)) {
				t.Fatalf("%q: raw %q plain %v pos %d", c.doc, raw, plain, d.pos)
			}
		}
	}
}
