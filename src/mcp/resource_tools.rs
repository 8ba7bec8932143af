//! The three model-callable resource tools, as the reference exposes them
//! (`agentao/mcp/resource_tools.py`): registered when a connected server declares resources;
//! read-only and never confirmed (a permission rule naming them still applies).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::client::{CallError, Connection};
use super::render::render_read;
use crate::tools::{arg_str, tool_metadata, Tool, ToolContext, ToolError};

pub(crate) const LIST_RESOURCES: &str = "list_mcp_resources";
pub(crate) const LIST_TEMPLATES: &str = "list_mcp_resource_templates";
pub(crate) const READ_RESOURCE: &str = "read_mcp_resource";

/// Which resource tools the config's tool selection keeps (`tools.enabled` / `tools.disabled`
/// may name them, as the reference's `enabled_tools` / `disable_tools` may).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceToolSelection {
    pub list: bool,
    pub templates: bool,
    pub read: bool,
}

impl ResourceToolSelection {
    pub fn from(selects: impl Fn(&str) -> bool) -> Self {
        ResourceToolSelection {
            list: selects(LIST_RESOURCES),
            templates: selects(LIST_TEMPLATES),
            read: selects(READ_RESOURCE),
        }
    }
}

/// The resource bounds of the all-servers walk, per server (the reference's).
const MAX_LIST_PAGES: usize = 100;
const MAX_LIST_ITEMS: usize = 1024;

/// The servers whose resources the tools reach: connected, declaring resources, not
/// `"resources": false`. Sorted by name.
pub(crate) type ResourceServers = Arc<Vec<Arc<Connection>>>;

fn find<'a>(servers: &'a ResourceServers, name: &str) -> Result<&'a Arc<Connection>, String> {
    servers.iter().find(|c| c.server == name).ok_or_else(|| {
        format!("Error: MCP server '{name}' is not connected or exposes no resources")
    })
}

fn is_mcp_app(uri: &str, mime: Option<&str>) -> bool {
    uri.starts_with("ui://")
        || mime
            .unwrap_or("")
            .to_ascii_lowercase()
            .replace(' ', "")
            .contains("profile=mcp-app")
}

/// One listing entry in the reference's shape (`server` first, `None`s dropped).
fn item(server: &str, v: &Value, templates: bool) -> Option<Value> {
    let uri_key = if templates { "uriTemplate" } else { "uri" };
    let uri = v.get(uri_key)?.as_str()?;
    if is_mcp_app(uri, v.get("mimeType").and_then(Value::as_str)) {
        return None;
    }
    let mut out = Map::new();
    out.insert("server".into(), json!(server));
    let mut keys = vec![uri_key, "name", "title", "description", "mimeType"];
    if !templates {
        keys.push("size");
    }
    for k in keys {
        if let Some(x) = v.get(k).filter(|x| !x.is_null()) {
            out.insert(k.into(), x.clone());
        }
    }
    Some(Value::Object(out))
}

pub(crate) struct ListResources {
    pub(crate) servers: ResourceServers,
    pub(crate) templates: bool,
}

impl ListResources {
    fn key(&self) -> &'static str {
        if self.templates {
            "resourceTemplates"
        } else {
            "resources"
        }
    }

    fn page(
        &self,
        conn: &Connection,
        cursor: Option<String>,
        ctx: &ToolContext<'_>,
    ) -> Result<(Vec<Value>, Option<String>), String> {
        let r = conn
            .runtime()
            .block_on(conn.list_resources(self.templates, cursor, ctx.cancel))
            .map_err(|e| match e {
                CallError::Cancelled => format!("[Operation Cancelled] {}", ctx.cancel.reason()),
                CallError::Failed(m) => format!("Error: {m}"),
            })?;
        let items = r
            .get(self.key())
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| item(&conn.server, v, self.templates))
                    .collect()
            })
            .unwrap_or_default();
        let next = r
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok((items, next))
    }
}

impl Tool for ListResources {
    fn name(&self) -> &str {
        if self.templates {
            LIST_TEMPLATES
        } else {
            LIST_RESOURCES
        }
    }

    fn description(&self) -> &str {
        if self.templates {
            "List parameterized resource templates (RFC 6570 URI templates) that connected MCP \
             servers expose. Expand a template into a URI and read it with read_mcp_resource."
        } else {
            "List the resources (files, documents, data) that connected MCP servers expose. Each \
             item names its server. To read an item, use read_mcp_resource.\n- With server: the \
             tool returns one page. To get the next page, pass cursor.\n- Without server: the \
             tool returns the resources of every server."
        }
    }

    fn parameters(&self) -> Value {
        let server = if self.templates {
            "MCP server name. Omit it to list the templates of every server."
        } else {
            "MCP server name. Omit to list every server's resources."
        };
        json!({"type": "object", "properties": {
            "server": {"type": "string", "description": server},
            "cursor": {"type": "string", "description": "The nextCursor value from the previous call. Use it only together with server."}}})
    }

    tool_metadata! {
        read_only: true,
        origin: Mcp,
    }

    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let server = arg_str(args, "server")?.filter(|s| !s.is_empty());
        let cursor = arg_str(args, "cursor")?.map(str::to_owned);
        let key = self.key();
        let Some(server) = server else {
            if cursor.is_some() {
                return Ok(
                    "Error: cursor requires server — there is no cursor across servers. \
                           Pass the server the cursor came from."
                        .into(),
                );
            }
            let what = if self.templates {
                "resource templates"
            } else {
                "resources"
            };
            let mut all = Vec::new();
            let mut errors = Vec::new();
            for conn in self.servers.iter() {
                let mut items = Vec::new();
                let mut cursor = None;
                let mut seen = std::collections::HashSet::new();
                let failure = loop {
                    if seen.len() >= MAX_LIST_PAGES {
                        break Some(format!(
                            "MCP server '{}' exceeded {MAX_LIST_PAGES} pages of {what}",
                            conn.server
                        ));
                    }
                    match self.page(conn, cursor.take(), ctx) {
                        Err(e) => break Some(e.trim_start_matches("Error: ").to_owned()),
                        Ok((page, next)) => {
                            if items.len() + page.len() > MAX_LIST_ITEMS {
                                break Some(format!(
                                    "MCP server '{}' listed more than {MAX_LIST_ITEMS} {what}",
                                    conn.server
                                ));
                            }
                            items.extend(page);
                            match next {
                                None => break None,
                                Some(n) if !seen.insert(n.clone()) => {
                                    break Some(format!(
                                    "MCP server '{}' returned a repeated {what} pagination cursor",
                                    conn.server
                                ))
                                }
                                Some(n) => cursor = Some(n),
                            }
                        }
                    }
                };
                match failure {
                    None => all.extend(items),
                    Some(e) => errors.push(json!({"server": conn.server, "error": e})),
                }
                if ctx.cancel.is_cancelled() {
                    return Ok(format!("[Operation Cancelled] {}", ctx.cancel.reason()));
                }
            }
            let mut payload = Map::new();
            payload.insert(key.into(), Value::Array(all));
            if !errors.is_empty() {
                payload.insert("errors".into(), Value::Array(errors));
            }
            return Ok(Value::Object(payload).to_string());
        };
        let conn = match find(&self.servers, server) {
            Ok(c) => c,
            Err(e) => return Ok(e),
        };
        match self.page(conn, cursor, ctx) {
            Err(e) => Ok(e),
            Ok((items, next)) => {
                let mut payload = Map::new();
                payload.insert("server".into(), json!(server));
                payload.insert(key.into(), Value::Array(items));
                if let Some(n) = next {
                    payload.insert("nextCursor".into(), json!(n));
                }
                Ok(Value::Object(payload).to_string())
            }
        }
    }
}

pub(crate) struct ReadResource {
    pub(crate) servers: ResourceServers,
}

impl Tool for ReadResource {
    tool_metadata! {
        name: READ_RESOURCE,
        read_only: true,
        description: "Read a resource from an MCP server by its URI. You must give the server. Use the server \
         that listed the item, or the server that a resource link in a tool result names. If the \
         content is binary, the tool saves it to a file and returns the file path.",
        parameters: {"type": "object", "properties": {
            "server": {"type": "string", "description": "MCP server name."},
            "uri": {"type": "string", "description": "Resource URI to read."}},
            "required": ["server", "uri"]},
        origin: Mcp,
    }

    fn execute(
        &self,
        args: &Map<String, Value>,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let server = arg_str(args, "server")?.unwrap_or("");
        let uri = arg_str(args, "uri")?.unwrap_or("");
        if server.is_empty() || uri.is_empty() {
            return Ok("Error: read_mcp_resource requires both server and uri.".into());
        }
        let conn = match find(&self.servers, server) {
            Ok(c) => c,
            Err(e) => return Ok(e),
        };
        match conn.runtime().block_on(conn.read_resource(uri, ctx.cancel)) {
            Ok(r) => Ok(render_read(uri, &r, Some(&ctx.services.tool_outputs))),
            Err(CallError::Cancelled) => {
                Ok(format!("[Operation Cancelled] {}", ctx.cancel.reason()))
            }
            Err(CallError::Failed(m)) => Ok(format!("Error: {m}")),
        }
    }
}
