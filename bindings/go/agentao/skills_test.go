package agentao

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSkillsReportAndActivation(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		d := filepath.Join(dir, "skills", name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "SKILL.md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pdf", "---\nname: pdf\ndescription: Fill PDF forms.\n---\n# PDF\nUse fill.py.\n")
	write("broken", "---\nname: broken\n")
	a := newAgent(t, config(dir,
		`{"tool_calls":[{"id":"a1","name":"activate_skill","arguments":{"skill_name":"pdf","task_description":"fill"}}]},{"text":"done"}`,
		`"skills":{"user_directory":null}`), nil)
	r, err := a.Skills()
	if err != nil || !r.Enabled || len(r.Skills) != 1 || r.Skills[0].Name != "pdf" || r.Skills[0].Origin != "repository" {
		t.Fatalf("Skills: %+v %v", r, err)
	}
	if len(r.Skipped) != 1 || r.Skipped[0].Kind != "front_matter" || !strings.Contains(r.Skipped[0].Reason, "not closed") {
		t.Fatalf("skipped: %+v", r.Skipped)
	}
	if text, err := a.Chat(context.Background(), "fill it"); err != nil || text != "done" {
		t.Fatalf("Chat: %q %v", text, err)
	}
	h, err := a.History()
	if err != nil || !strings.Contains(string(h), "Skill Activated: pdf") || !strings.Contains(string(h), "Use fill.py.") {
		t.Fatalf("history: %s %v", h, err)
	}
	closeAndWait(t, a)
	if _, err := a.Skills(); err != ErrClosed {
		t.Fatalf("after Close: %v", err)
	}
}
