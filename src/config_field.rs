//! How config sections are read: each layer derives `Deserialize` for its own section, and
//! these helpers make serde report errors the way the config always has: a field path and the
//! section's own words (`config field `permissions.mode`: must be a string`).
//!
//! Serde's defaults are wrong for a closed config in two places this module fixes: a derived
//! struct also accepts a JSON array (read by position), and an unknown key is worded by serde.
//! [`object`] accepts only a JSON object and lets a section word its unknown keys.

use std::cell::Cell;
use std::convert::Infallible;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeSeed, Deserializer, Error, IntoDeserializer, MapAccess, Visitor};
use serde::Deserialize;

/// How a section reports a key it does not know.
pub(crate) enum UnknownKey {
    /// Serde's own words (`unknown field `x`, expected one of …`), at the key's path.
    Serde,
    /// These words, at the path of the object that holds the key.
    AtObject(String),
    /// These words, at the key's path.
    AtKey(String),
}

/// A config object: the keys it knows, and how it words an unknown one.
pub(crate) trait Section {
    /// Every key of the object; with [`UnknownKey::Serde`] this may be left empty.
    const KEYS: &'static [&'static str] = &[];

    fn unknown_key(_key: &str) -> UnknownKey {
        UnknownKey::Serde
    }
}

/// Reads a [`Section`] that must be a JSON object (`must be an object` otherwise). For
/// `#[serde(deserialize_with = "…")]` on a field that is not an `Option`.
pub(crate) fn object<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Section + Deserialize<'de>,
{
    // Only a failure before the object is entered is the object's own type error; one inside
    // it already names a deeper field in its own words.
    let entered = Cell::new(false);
    d.deserialize_map(ObjectVisitor {
        entered: &entered,
        section: PhantomData,
    })
    .map_err(|e| {
        if entered.get() {
            e
        } else {
            D::Error::custom("must be an object")
        }
    })
}

/// [`object`] for an `Option` field: `null` is `None`.
pub(crate) fn optional_object<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Section + Deserialize<'de>,
{
    struct Wrapped<T>(T);
    impl<'de, T: Section + Deserialize<'de>> Deserialize<'de> for Wrapped<T> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            object(d).map(Wrapped)
        }
    }
    Ok(Option::<Wrapped<T>>::deserialize(d)?.map(|w| w.0))
}

/// Reads a value whose failure has one message, whatever serde would say. Only for values
/// without nested fields, whose own errors would name a deeper path.
pub(crate) fn worded<'de, D, T>(d: D, words: &'static str) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map_err(|_| D::Error::custom(words))
}

/// `Option<bool>` worded `must be a boolean`.
pub(crate) fn optional_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    worded(d, "must be a boolean")
}

/// `bool` worded `must be a boolean` (`null` refused).
pub(crate) fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    worded(d, "must be a boolean")
}

/// The message of a config error: `config field `path`: words`, or `config: words` for the
/// document itself. A message starting with `[i]` names an item of the list at the path, as in
/// ``config field `permissions.rules`[1]: unknown key `foo` ``. The JSON position is left out
/// (the path names the field).
pub(crate) fn message(e: &serde_path_to_error::Error<serde_json::Error>) -> String {
    let inner = e.inner();
    let text = inner.to_string();
    let suffix = format!(" at line {} column {}", inner.line(), inner.column());
    let words = match inner.line() {
        0 => &text[..],
        _ => text.strip_suffix(&suffix).unwrap_or(&text),
    };
    let path = e.path().to_string();
    if path == "." {
        format!("config: {words}")
    } else if words.starts_with('[') {
        format!("config field `{path}`{words}")
    } else {
        format!("config field `{path}`: {words}")
    }
}

struct ObjectVisitor<'a, T> {
    entered: &'a Cell<bool>,
    section: PhantomData<T>,
}

impl<'de, T: Section + Deserialize<'de>> Visitor<'de> for ObjectVisitor<'_, T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        self.entered.set(true);
        T::deserialize(MapAccessDeserializer::new(KnownKeys {
            map,
            section: PhantomData::<T>,
        }))
    }
}

/// Hands the derived code only keys the section knows; the section words any other.
struct KnownKeys<A, T> {
    map: A,
    section: PhantomData<T>,
}

impl<'de, A: MapAccess<'de>, T: Section> MapAccess<'de> for KnownKeys<A, T> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let Some(key) = self.map.next_key::<String>()? else {
            return Ok(None);
        };
        if !T::KEYS.is_empty() && !T::KEYS.contains(&key.as_str()) {
            match T::unknown_key(&key) {
                UnknownKey::Serde => {}
                UnknownKey::AtObject(words) => return Err(A::Error::custom(words)),
                // Raised while reading the key's value, so the path ends with the key.
                UnknownKey::AtKey(words) => match self.map.next_value_seed(Refuse(words))? {},
            }
        }
        let de: serde::de::value::StringDeserializer<A::Error> = key.into_deserializer();
        match seed.deserialize(de) {
            Ok(k) => Ok(Some(k)),
            // The derived code refused the key: report it at the key's path, as serde does.
            Err(e) => match self.map.next_value_seed(Refuse(e.to_string()))? {},
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// A value that is refused with fixed words, whatever it is.
struct Refuse(String);

impl<'de> DeserializeSeed<'de> for Refuse {
    type Value = Infallible;

    fn deserialize<D: Deserializer<'de>>(self, _: D) -> Result<Infallible, D::Error> {
        Err(D::Error::custom(self.0))
    }
}
