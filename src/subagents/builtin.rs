//! The reference's two built-in sub-agents, offered when the config sets `subagents.builtin`.

use super::definition::SubagentDefinition;

/// `codebase-investigator` and `generalist`, as the reference ships them (budget 100 turns).
pub(crate) fn builtin_definitions() -> Vec<SubagentDefinition> {
    vec![
        SubagentDefinition {
            name: "codebase-investigator".into(),
            description: "Explore a codebase: find files, search code patterns, and analyze the project structure. Use this agent for investigation tasks that do not change files.".into(),
            instructions: Some("You are a codebase investigation agent. Use tools to explore and analyze code to complete the assigned task.\nDo NOT modify any files. Gather sufficient information, then call complete_task to return your findings.\nPrefer glob and search_file_content over shell commands when possible.".into()),
            tools: Some(
                ["read_file", "list_directory", "glob", "search_file_content", "run_shell_command"]
                    .map(String::from)
                    .to_vec(),
            ),
            max_turns: 100,
            model: None,
            temperature: None,
        },
        SubagentDefinition {
            name: "generalist".into(),
            description: "General-purpose agent. It gets most of your tools, but not the agent tools or the plan tools. Use this agent for complex tasks with many steps that need file reads and writes, shell commands, or web access.".into(),
            instructions: Some("You are a general-purpose agent. Use all available tools to complete the assigned task.\nMethodology: understand the problem, plan, execute, verify.\nWhen finished, call complete_task to return the result.".into()),
            tools: None,
            max_turns: 100,
            model: None,
            temperature: None,
        },
    ]
}
