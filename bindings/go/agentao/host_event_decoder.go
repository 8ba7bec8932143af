package agentao

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

// eventDecoder reads a host event's JSON into its generated struct without reflection: the
// generated decodeFrom methods (host_events_decode_gen.go) switch on each key and call the
// readers here. encoding/json's typed decode cost ~5 µs an event, most of an observer's time.
//
// It reads the shapes the library writes, strictly. Anything else (an escaped key, a key that
// differs from a field's only in case, a null in a list, a value of another type, a syntax
// error) stops it, and decodeHostEvent decodes the event again with encoding/json, whose
// answer is then the one given. So an event it accepts decodes exactly as encoding/json
// decodes it (FuzzHostEventDecoderMatchesEncodingJSON checks that), and what it refuses is
// left to encoding/json.
type eventDecoder struct {
	data []byte
	pos  int
	// failed is sticky: once set, every reader returns at once.
	failed bool
	// first is true right after an object's '{' (no member read yet).
	first bool
	// key is the current member's key (a slice of data).
	key []byte
	// text is data as a string (the same bytes): every plain string value is a substring of
	// it, no allocation of its own.
	text string
	// strs holds the values of optional strings, for the same reason: each *string points
	// into it (a full slab is left to its pointers and a new one started).
	strs []string
}

// fastDecodable is a generated event struct.
type fastDecodable interface {
	decodeFrom(d *eventDecoder)
}

// decodeFast decodes text into ev; false when the decoder stopped (ev is then partly written).
func decodeFast(text string, ev fastDecodable) bool {
	d := eventDecoder{data: unsafe.Slice(unsafe.StringData(text), len(text)), text: text}
	ev.decodeFrom(&d)
	d.ws()
	return !d.failed && d.pos == len(d.data)
}

func (d *eventDecoder) fail() { d.failed = true }

func (d *eventDecoder) ws() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// peek is the next byte after white space, 0 at the end.
func (d *eventDecoder) peek() byte {
	d.ws()
	if d.pos < len(d.data) {
		return d.data[d.pos]
	}
	return 0
}

// object reads an object's '{'; false (and failed) for anything else.
func (d *eventDecoder) object() bool {
	if d.failed || d.peek() != '{' {
		d.fail()
		return false
	}
	d.pos++
	d.first = true
	return true
}

// member reads the next member's key and its ':' into d.key; false at the object's '}'
// (consumed) or on failure.
func (d *eventDecoder) member() bool {
	if d.failed {
		return false
	}
	c := d.peek()
	if c == '}' {
		d.pos++
		d.first = false
		return false
	}
	if !d.first {
		if c != ',' {
			d.fail()
			return false
		}
		d.pos++
		c = d.peek()
	}
	d.first = false
	if c != '"' {
		d.fail()
		return false
	}
	raw, plain := d.stringToken()
	if !plain { // an escaped or non-ASCII key: encoding/json's own matching decides
		d.fail()
		return false
	}
	d.key = raw[1 : len(raw)-1]
	if d.peek() != ':' {
		d.fail()
		return false
	}
	d.pos++
	return true
}

// unknownKey skips the value of a key no field has. A key equal to a field's but for case
// would fill that field in encoding/json (it matches case-insensitively): that one stops.
func (d *eventDecoder) unknownKey(fields []string) {
	for _, f := range fields {
		if strings.EqualFold(f, string(d.key)) {
			d.fail()
			return
		}
	}
	d.skip()
}

// null reads a null if one is next.
func (d *eventDecoder) null() bool {
	if d.failed || d.peek() != 'n' {
		return false
	}
	if d.literal("null") {
		return true
	}
	d.fail()
	return false
}

func (d *eventDecoder) literal(word string) bool {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		return false
	}
	d.pos += len(word)
	return true
}

// stringToken reads a string (d.pos at its '"') and returns it with its quotes, and whether it
// is plain: no escape and only ASCII, so its bytes are its value. Fails on a control character
// or a missing end. Most of an event is its strings (ids, times, names): eight bytes at a time
// are passed over while none of them needs a look (ordinaryBytes), a byte at a time otherwise.
func (d *eventDecoder) stringToken() (raw []byte, plain bool) {
	start := d.pos
	plain = true
	data := d.data
	i := d.pos + 1
	for i < len(data) {
		for i+8 <= len(data) && ordinaryBytes(binary.LittleEndian.Uint64(data[i:])) {
			i += 8
		}
		if i >= len(data) {
			break
		}
		c := data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return data[start:d.pos], plain
		case c == '\\':
			plain = false
			i++
			if i >= len(data) {
				d.fail()
				return nil, false
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 > len(data) {
					d.fail()
					return nil, false
				}
				for _, h := range data[i+1 : i+5] {
					if !isHex(h) {
						d.fail()
						return nil, false
					}
				}
				i += 5
			default:
				d.fail()
				return nil, false
			}
		case c < 0x20:
			d.fail()
			return nil, false
		default:
			if c >= 0x80 {
				plain = false
			}
			i++
		}
	}
	d.fail()
	return nil, false
}

// ordinaryBytes tells whether none of the eight bytes in x is a quote, a backslash, a control
// character or a non-ASCII byte (the SWAR tests for a zero byte and for a byte below n; a borrow
// can only mark a byte above one that matched, so "none" is exact).
func ordinaryBytes(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	special := (quote - ones) &^ quote
	special |= (backslash - ones) &^ backslash
	special |= (x - ones*0x20) &^ x
	special |= x
	return special&highs == 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// quoted reads the string token at the cursor (quotes included) and whether it is plain; ok is
// false at a null (the caller's value stays as it is, as encoding/json leaves it) and on a
// failure.
func (d *eventDecoder) quoted() (raw []byte, plain, ok bool) {
	if d.null() || d.failed {
		return nil, false, false
	}
	if d.peek() != '"' {
		d.fail()
		return nil, false, false
	}
	raw, plain = d.stringToken()
	return raw, plain, !d.failed
}

// str reads a string into *p; a null leaves *p as it is (as encoding/json does).
func (d *eventDecoder) str(p *string) {
	raw, plain, ok := d.quoted()
	if !ok {
		return
	}
	body := raw[1 : len(raw)-1]
	if plain || (bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body)) {
		end := d.pos - 1
		*p = d.text[end-len(body) : end]
		return
	}
	// Escapes or invalid UTF-8 (which encoding/json replaces): rare, so its own decoder.
	if err := json.Unmarshal(raw, p); err != nil {
		d.fail()
	}
}

// optStr reads a string or null into *p.
func (d *eventDecoder) optStr(p **string) {
	if d.null() {
		*p = nil
		return
	}
	if len(d.strs) == cap(d.strs) {
		d.strs = make([]string, 0, 8)
	}
	d.strs = append(d.strs, "")
	s := &d.strs[len(d.strs)-1]
	d.str(s)
	*p = s
}

// time reads an RFC 3339 string through time.Time's own UnmarshalJSON, as encoding/json does;
// a null leaves *p as it is.
func (d *eventDecoder) time(p *time.Time) {
	raw, _, ok := d.quoted()
	if !ok {
		return
	}
	if err := p.UnmarshalJSON(raw); err != nil {
		d.fail()
	}
}

func (d *eventDecoder) optTime(p **time.Time) {
	if d.null() {
		*p = nil
		return
	}
	t := new(time.Time)
	d.time(t)
	*p = t
}

// numberToken reads a JSON number (the whole grammar, so that a skipped one is checked too).
func (d *eventDecoder) numberToken() []byte {
	start := d.pos
	i := d.pos
	digits := func() bool {
		n := i
		for i < len(d.data) && '0' <= d.data[i] && d.data[i] <= '9' {
			i++
		}
		return i > n
	}
	if i < len(d.data) && d.data[i] == '-' {
		i++
	}
	switch {
	case i < len(d.data) && d.data[i] == '0':
		i++
	case !digits():
		d.fail()
		return nil
	}
	if i < len(d.data) && d.data[i] == '.' {
		i++
		if !digits() {
			d.fail()
			return nil
		}
	}
	if i < len(d.data) && (d.data[i] == 'e' || d.data[i] == 'E') {
		i++
		if i < len(d.data) && (d.data[i] == '+' || d.data[i] == '-') {
			i++
		}
		if !digits() {
			d.fail()
			return nil
		}
	}
	d.pos = i
	return d.data[start:i]
}

// int reads an integer into *p (a fraction or an exponent stops, as it fails encoding/json);
// a null leaves *p as it is.
func (d *eventDecoder) int(p *int64) {
	if d.null() || d.failed {
		return
	}
	if c := d.peek(); c != '-' && (c < '0' || c > '9') {
		d.fail()
		return
	}
	tok := d.numberToken()
	if d.failed {
		return
	}
	n, err := strconv.ParseInt(string(tok), 10, 64)
	if err != nil {
		d.fail()
		return
	}
	*p = n
}

// optInt reads an integer or null into *p.
func (d *eventDecoder) optInt(p **int64) {
	if d.null() {
		*p = nil
		return
	}
	n := new(int64)
	d.int(n)
	*p = n
}

// strList reads an array of strings (a null gives nil, `[]` an empty list, as encoding/json).
func (d *eventDecoder) strList(p *[]string) {
	if d.null() {
		*p = nil
		return
	}
	if d.failed || d.peek() != '[' {
		d.fail()
		return
	}
	d.pos++
	list := []string{}
	if d.peek() == ']' {
		d.pos++
		*p = list
		return
	}
	for !d.failed {
		if d.peek() != '"' { // a null element would keep an old value in encoding/json
			d.fail()
			return
		}
		var s string
		d.str(&s)
		list = append(list, s)
		switch d.peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			*p = list
			return
		default:
			d.fail()
		}
	}
}

// raw reads any value into *p as written (a null as `null`), as json.RawMessage does.
func (d *eventDecoder) raw(p *json.RawMessage) {
	if d.failed {
		return
	}
	d.ws()
	start := d.pos
	d.skip()
	if !d.failed {
		*p = append(json.RawMessage(nil), d.data[start:d.pos]...)
	}
}

// skip reads one value of any kind, checking its syntax.
func (d *eventDecoder) skip() {
	d.skipDepth(0)
}

// maxSkipDepth bounds the nesting of a skipped value (encoding/json allows 10,000; deeper
// stops here and goes to it).
const maxSkipDepth = 512

func (d *eventDecoder) skipDepth(depth int) {
	if d.failed {
		return
	}
	if depth > maxSkipDepth {
		d.fail()
		return
	}
	switch c := d.peek(); {
	case c == '"':
		d.stringToken()
	case c == '-' || '0' <= c && c <= '9':
		d.numberToken()
	case c == 't':
		if !d.literal("true") {
			d.fail()
		}
	case c == 'f':
		if !d.literal("false") {
			d.fail()
		}
	case c == 'n':
		if !d.literal("null") {
			d.fail()
		}
	case c == '[':
		d.pos++
		if d.peek() == ']' {
			d.pos++
			return
		}
		for !d.failed {
			d.skipDepth(depth + 1)
			switch d.peek() {
			case ',':
				d.pos++
			case ']':
				d.pos++
				return
			default:
				d.fail()
			}
		}
	case c == '{':
		d.pos++
		if d.peek() == '}' {
			d.pos++
			return
		}
		for !d.failed {
			if d.peek() != '"' {
				d.fail()
				return
			}
			d.stringToken()
			if d.peek() != ':' {
				d.fail()
				return
			}
			d.pos++
			d.skipDepth(depth + 1)
			switch d.peek() {
			case ',':
				d.pos++
			case '}':
				d.pos++
				return
			default:
				d.fail()
			}
		}
	default:
		d.fail()
	}
}
