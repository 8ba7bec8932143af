//! The metadata half of an `impl Tool` as one table ([`tool_metadata!`]): what the model is
//! shown of a tool, without a method around each value.

#[cfg(doc)]
use super::ToolOrigin;

/// Expands, inside an `impl Tool`, to the metadata methods of the keys given: `name` and
/// `description` (a literal or a constant), `read_only` (a bool), `origin` (a [`ToolOrigin`]
/// variant without fields) and `parameters` (the arguments' JSON Schema in `json!` syntax). A key left out keeps the trait's default, or is
/// written by hand where it is built at run time (a description that names the configured
/// shell).
macro_rules! tool_metadata {
    ($($key:ident: $value:tt),+ $(,)?) => {
        $($crate::tools::metadata::tool_metadata!(@$key $value);)+
    };
    (@name $name:tt) => {
        fn name(&self) -> &str {
            $name
        }
    };
    (@description $description:tt) => {
        fn description(&self) -> &str {
            $description
        }
    };
    (@read_only $read_only:tt) => {
        fn is_read_only(&self) -> bool {
            $read_only
        }
    };
    (@origin $origin:ident) => {
        fn origin(&self) -> $crate::tools::ToolOrigin {
            $crate::tools::ToolOrigin::$origin
        }
    };
    (@parameters $schema:tt) => {
        fn parameters(&self) -> serde_json::Value {
            serde_json::json!($schema)
        }
    };
}

pub(crate) use tool_metadata;
