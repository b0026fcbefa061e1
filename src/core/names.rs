//! Fieldless enums whose variants have names: the one declaration of a code and the name JS shows
//! for it (`NAMES[v as usize]`), so a table in JS never has to mirror a Rust enum by hand.

/// `named_enum! { #[derive(..)] pub enum E: u8 { /// doc
///     A = "a", B = "b" } }` declares `E` (numbered 0, 1, … in declaration order) with
/// `E::NAMES`, `E::ALL` and `E::as_str`.
macro_rules! named_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident : $repr:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[repr($repr)]
        $vis enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every variant's name, by its number (`v as usize`).
            pub const NAMES: &'static [&'static str] = &[$($text),+];
            /// Every variant, by its number.
            #[allow(dead_code)]
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            #[allow(dead_code)]
            pub fn as_str(self) -> &'static str {
                Self::NAMES[self as usize]
            }

            /// The variant of that name.
            #[allow(dead_code)]
            pub fn from_name(name: &str) -> Option<Self> {
                Self::NAMES.iter().position(|n| *n == name).map(|i| Self::ALL[i])
            }
        }
    };
}

pub(crate) use named_enum;

#[cfg(test)]
mod tests {
    named_enum! {
        #[derive(Clone, Copy, Debug, PartialEq)]
        enum Sample: u8 {
            /// The first.
            First = "first",
            Second = "second-one",
        }
    }

    #[test]
    fn names_follow_the_numbering() {
        assert_eq!(Sample::NAMES, &["first", "second-one"]);
        assert_eq!((Sample::Second as u8, Sample::Second.as_str()), (1, "second-one"));
        assert_eq!(Sample::First.as_str(), "first");
        assert_eq!(Sample::ALL, &[Sample::First, Sample::Second]);
    }
}
