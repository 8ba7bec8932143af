package agentao

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func toolCall(id, tool, args, final string) string {
	return fmt.Sprintf(`{"tool_calls":[{"id":%q,"name":%q,"arguments":%s}]},{"text":%q}`, id, tool, args, final)
}

// memFS is a FileSystem in memory: a map of absolute paths to contents under root.
type memFS struct {
	mu    sync.Mutex
	root  string
	files map[string][]byte
	reads []string
}

func (m *memFS) ReadFile(path string, maxBytes uint64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads = append(m.reads, path)
	if path == filepath.Join(m.root, "boom.txt") {
		panic("remote store offline")
	}
	b, ok := m.files[path]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return b, nil // longer than maxBytes is cut by the binding
}

func (m *memFS) WriteFile(path string, data []byte, appendTo bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if appendTo {
		data = append(append([]byte{}, m.files[path]...), data...)
	}
	m.files[path] = append([]byte{}, data...)
	return nil
}

func (m *memFS) ListDir(path string) ([]DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []DirEntry
	for p, b := range m.files {
		if filepath.Dir(p) == path {
			out = append(out, DirEntry{Name: filepath.Base(p), Kind: KindFile, Size: uint64(len(b))})
		}
	}
	return out, nil
}

func (m *memFS) Walk(base string, maxDepth int) ([]WalkEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []WalkEntry
	for p := range m.files {
		if strings.HasPrefix(p, base+"/") {
			out = append(out, WalkEntry{Path: p, Kind: KindFile})
		}
	}
	return out, nil
}

func (m *memFS) Stat(path string) (FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if path == m.root {
		return FileInfo{Kind: KindDir, ModTime: time.Unix(1000, 0)}, nil
	}
	if b, ok := m.files[path]; ok {
		return FileInfo{Size: uint64(len(b)), Kind: KindFile, ModTime: time.Unix(1000, 0)}, nil
	}
	if path == filepath.Join(m.root, "boom.txt") {
		return FileInfo{Size: 3, Kind: KindFile}, nil
	}
	return FileInfo{}, fs.ErrNotExist
}

func TestFileSystemServesTheFileTools(t *testing.T) {
	dir := t.TempDir()
	m := &memFS{root: dir, files: map[string][]byte{filepath.Join(dir, "notes.txt"): []byte("served from memory\n")}}
	script := toolCall("r1", "read_file", `{"file_path":"notes.txt"}`, "read") + "," +
		toolCall("w1", "write_file", `{"file_path":"new.txt","content":"virtual"}`, "wrote") + "," +
		toolCall("m1", "read_file", `{"file_path":"missing.txt"}`, "missing") + "," +
		toolCall("b1", "read_file", `{"file_path":"boom.txt"}`, "boom")
	a := newAgent(t, config(dir, script, ""), nil)
	if err := a.SetFileSystem(m); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"read", "wrote", "missing", "boom"} {
		if text, err := a.Chat(context.Background(), want); err != nil || text != want {
			t.Fatalf("Chat: %q %v", text, err)
		}
	}
	h := historyText(t, a)
	if !strings.Contains(h, "served from memory") {
		t.Fatalf("read_file did not read the host's file: %s", h)
	}
	if _, ok := readFile(dir, "new.txt"); ok {
		t.Fatal("write_file wrote to the disk")
	}
	m.mu.Lock()
	if got := string(m.files[filepath.Join(dir, "new.txt")]); got != "virtual" {
		t.Errorf("new.txt in the host's map: %q", got)
	}
	m.mu.Unlock()
	// fs.ErrNotExist is ENOENT, a panic EIO: both reach the model as OS errors.
	if !strings.Contains(h, "Error: File missing.txt does not exist") {
		t.Errorf("missing file: %s", h)
	}
	if !strings.Contains(h, "Input/output error") {
		t.Errorf("panicking read: %s", h)
	}
	if err := a.SetFileSystem(nil); err != nil {
		t.Fatal(err)
	}
	closeAndWait(t, a)
}

// hostShell records commands and answers them itself.
type hostShell struct {
	mu       sync.Mutex
	commands []string
}

func (s *hostShell) Run(ctx context.Context, req ShellRequest, run *ShellRun) {
	s.mu.Lock()
	s.commands = append(s.commands, req.Command)
	s.mu.Unlock()
	switch req.Command {
	case "explode":
		panic("sandbox unavailable")
	case "wait":
		<-ctx.Done() // until the turn is cancelled
		_ = run.Finish(-15, false, true)
		return
	}
	_ = run.Output(Stdout, []byte("built by the host in "+filepath.Base(req.Cwd)+"\n"))
	_ = run.Finish(0, false, false)
}

func TestShellExecutorRunsTheCommands(t *testing.T) {
	dir := t.TempDir()
	script := toolCall("s1", "run_shell_command", `{"command":"make all"}`, "made") + "," +
		toolCall("s2", "run_shell_command", `{"command":"explode"}`, "exploded") + "," +
		toolCall("s3", "run_shell_command", `{"command":"wait"}`, "never")
	a := newAgent(t, config(dir, script, ""), nil)
	sh := &hostShell{}
	if err := a.SetShellExecutor(sh, ""); err != nil {
		t.Fatal(err)
	}
	if text, err := a.Chat(context.Background(), "build"); err != nil || text != "made" {
		t.Fatalf("Chat: %q %v", text, err)
	}
	if h := historyText(t, a); !strings.Contains(h, "built by the host in "+filepath.Base(dir)) {
		t.Fatalf("history: %s", h)
	}
	if text, err := a.Chat(context.Background(), "explode"); err != nil || text != "exploded" {
		t.Fatalf("Chat: %q %v", text, err)
	}
	if h := historyText(t, a); !strings.Contains(h, "Error starting command: panic in the host's ShellExecutor: sandbox unavailable") {
		t.Fatalf("history: %s", h)
	}
	// The run's context follows the turn's cancellation.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := a.Chat(ctx, "wait"); !errors.Is(err, StatusCancelled) {
		t.Fatalf("Chat: %v", err)
	}
	sh.mu.Lock()
	if strings.Join(sh.commands, "|") != "make all|explode|wait" {
		t.Errorf("commands %q", sh.commands)
	}
	sh.mu.Unlock()
	closeAndWait(t, a)
}

// hostMemory keeps records in a slice; keys named fail_me are refused.
type hostMemory struct {
	mu      sync.Mutex
	records []json.RawMessage
	lists   int
}

func (m *hostMemory) Upsert(record json.RawMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if strings.Contains(string(record), "fail_me") {
		return errors.New("store is read-only")
	}
	m.records = append(m.records, append(json.RawMessage{}, record...))
	return nil
}

func (m *hostMemory) List(scope string) (json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lists++
	b, err := json.Marshal(m.records) // null while empty: the binding reads it as []
	return b, err
}

func TestMemoryStoreKeepsSaveMemory(t *testing.T) {
	dir := t.TempDir()
	script := toolCall("m1", "save_memory", `{"key":"Preferred Language","value":"Rust"}`, "saved") + "," +
		toolCall("m2", "save_memory", `{"key":"fail_me","value":"x"}`, "refused")
	a := newAgent(t, config(dir, script, ""), nil)
	m := &hostMemory{}
	if err := a.SetMemoryStore(m); err != nil {
		t.Fatal(err)
	}
	if text, err := a.Chat(context.Background(), "remember"); err != nil || text != "saved" {
		t.Fatalf("Chat: %q %v", text, err)
	}
	m.mu.Lock()
	if len(m.records) != 1 || !strings.Contains(string(m.records[0]), `"key_normalized":"preferred_language"`) {
		t.Fatalf("records %s; history %s", m.records, historyText(t, a))
	}
	if m.lists == 0 {
		t.Error("the turn never listed the host's memories")
	}
	m.mu.Unlock()
	if text, err := a.Chat(context.Background(), "remember more"); err != nil || text != "refused" {
		t.Fatalf("Chat: %q %v", text, err)
	}
	if h := historyText(t, a); !strings.Contains(h, "Error saving memory: the memory store failed `upsert`: store is read-only") {
		t.Fatalf("history: %s", h)
	}
	closeAndWait(t, a)
}
