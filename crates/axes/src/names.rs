//! `names!`: a closed set of values, each with the one name it has on the command line and in result
//! files. The enum gets `ALL` (declaration order, which is also its `Ord`), `name`, `from_name`,
//! `expected` (the names as a phrase, `a, b or c`), `Display` (padded: `{:>8}` aligns it), and serde as the
//! name.

/// `a`, `a or b`, `a, b or c`: a list of names as a message offers them.
pub fn or_list(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// Values' names joined by `sep` (`pg,futex`; `4k vs thp`).
pub fn join<T: std::fmt::Display>(values: &[T], sep: &str) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(sep)
}

/// A closed set of names (every `names!` enum): what a caller needs to parse one generically.
pub trait Named: Sized + Copy + 'static {
    /// Every value, in declaration order.
    fn all() -> &'static [Self];
    /// The value a name names, if any.
    fn from_name(s: &str) -> Option<Self>;
    /// The names as a message offers them: `a, b or c`.
    fn expected() -> String;
    /// The name.
    fn name(self) -> &'static str;
}

macro_rules! names {
    (
        $(#[$meta:meta])*
        pub enum $T:ident {
            $( $(#[$vmeta:meta])* $V:ident = $name:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
        )]
        pub enum $T {
            $( $(#[$vmeta])* #[serde(rename = $name)] $V, )+
        }

        impl $T {
            /// Every value, in declaration order.
            pub const ALL: &'static [$T] = &[$($T::$V),+];

            /// The name, as given on the command line and written in result files.
            pub fn name(self) -> &'static str {
                match self {
                    $($T::$V => $name,)+
                }
            }

            /// The value a name names, if any.
            pub fn from_name(s: &str) -> Option<$T> {
                match s {
                    $($name => Some($T::$V),)+
                    _ => None,
                }
            }

            /// The names as a message offers them: `a, b or c`.
            pub fn expected() -> String {
                $crate::names::or_list(&[$($name),+])
            }
        }

        impl $crate::Named for $T {
            fn all() -> &'static [$T] {
                $T::ALL
            }
            fn from_name(s: &str) -> Option<$T> {
                $T::from_name(s)
            }
            fn expected() -> String {
                $T::expected()
            }
            fn name(self) -> &'static str {
                $T::name(self)
            }
        }

        // `pad`, not `write_str`: a table's `{:>8}` aligns the name.
        impl std::fmt::Display for $T {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.name())
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::or_list;

    #[test]
    fn lists_read_as_sentences() {
        assert_eq!(or_list(&["a"]), "a");
        assert_eq!(or_list(&["a", "b"]), "a or b");
        assert_eq!(or_list(&["a", "b", "c"]), "a, b or c");
        assert_eq!(or_list(&[]), "");
    }
}
