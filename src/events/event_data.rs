//! `event_data!`: how an event's payload struct is declared, its transport JSON following from
//! its field list.

/// Declares an event's data struct and its [`super::EventData`]: the fields in order, each
/// written as `"name":value`; a field marked `#[skip_if(f)]` is left out when `f(&value)` holds.
/// The fields of an optional `host_only { … }` block after the struct are the event's too, but
/// only the host-event projection reads them (`host_projection.rs`): never on the transport.
macro_rules! event_data {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident $(<$lt:lifetime>)? {
            $(
                $(#[doc = $doc:literal])*
                $(#[skip_if($skip:path)])?
                $fvis:vis $field:ident : $ty:ty,
            )*
        }
        $(
            host_only {
                $(
                    $(#[doc = $hdoc:literal])*
                    $hvis:vis $hfield:ident : $hty:ty,
                )*
            }
        )?
    ) => {
        $(#[$meta])*
        $vis struct $name $(<$lt>)? {
            $( $(#[doc = $doc])* $fvis $field: $ty, )*
            $($( $(#[doc = $hdoc])* $hvis $hfield: $hty, )*)?
        }

        impl $(<$lt>)? $crate::events::EventData for $name $(<$lt>)? {
            fn write_fields(&self, fields: &mut $crate::events::Fields<'_>) {
                $(
                    if !$crate::events::event_data!(@skip &self.$field $(, $skip)?) {
                        fields.field(concat!("\"", stringify!($field), "\":"), &self.$field);
                    }
                )*
            }
        }
    };
    (@skip $value:expr) => { false };
    (@skip $value:expr, $skip:path) => { $skip($value) };
}
pub(crate) use event_data;
