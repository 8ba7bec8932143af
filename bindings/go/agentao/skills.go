package agentao

/*
#include "shim.h"
*/
import "C"

// Skill is one skill the agent may activate (docs/skills.md).
type Skill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Origin is "user", "workspace", "repository", "configured" or "inline".
	Origin string `json:"origin"`
	// Path is the SKILL.md file; nil for an inline skill.
	Path *string `json:"path"`
}

// SkippedSkill is a SKILL.md (or a location) discovery left out.
type SkippedSkill struct {
	Path *string `json:"path"`
	Name *string `json:"name"`
	// Kind is "too_large", "not_utf8", "front_matter", "name", "outside_location",
	// "unreadable", "over_limit" or "shadowed".
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// SkillsReport is what the agent's skills section found (agentao_agent_skills).
type SkillsReport struct {
	Enabled bool           `json:"enabled"`
	Skills  []Skill        `json:"skills"`
	Skipped []SkippedSkill `json:"skipped"`
	// PromptChars is the size of the catalogue's block in the system prompt.
	PromptChars int `json:"prompt_chars"`
}

// Skills reports the agent's skills and what was skipped, why. The first call finds the skills
// if no turn has yet, blocking for the file reads.
func (a *Agent) Skills() (*SkillsReport, error) {
	return getDecoded[SkillsReport](a, func(p *C.agentao_agent, o **C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_skills(p, o, e)
	})
}
