//! A small JSON reader for the tests' shared fixtures (serde is not a dependency): objects, arrays,
//! numbers, strings (escapes `\"`, `\\`, `\/`, `\n` only), booleans and null. It panics on anything
//! else, naming the byte offset: a fixture that does not parse is a broken test, not an input to handle.

#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    /// Members in the order written.
    Obj(Vec<(String, Json)>),
}

impl Json {
    pub fn parse(text: &str) -> Json {
        let mut p = Parser { b: text.as_bytes(), i: 0 };
        let v = p.value();
        p.ws();
        assert_eq!(p.i, p.b.len(), "JSON: trailing text at byte {}", p.i);
        v
    }

    /// The member `key` of an object, if there is one.
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.obj().iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The member `key`, which must be there.
    pub fn at(&self, key: &str) -> &Json {
        self.get(key).unwrap_or_else(|| panic!("JSON: no member {key:?}"))
    }

    pub fn obj(&self) -> &[(String, Json)] {
        match self {
            Json::Obj(m) => m,
            v => panic!("JSON: an object expected, got {v:?}"),
        }
    }

    pub fn arr(&self) -> &[Json] {
        match self {
            Json::Arr(a) => a,
            v => panic!("JSON: an array expected, got {v:?}"),
        }
    }

    pub fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            v => panic!("JSON: a string expected, got {v:?}"),
        }
    }

    pub fn bool(&self) -> bool {
        match self {
            Json::Bool(b) => *b,
            v => panic!("JSON: a boolean expected, got {v:?}"),
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    /// A whole, non-negative number.
    pub fn u64(&self) -> u64 {
        match self {
            Json::Num(n) if *n >= 0.0 && n.fract() == 0.0 && *n < 9.007e15 => *n as u64,
            v => panic!("JSON: a whole number >= 0 expected, got {v:?}"),
        }
    }
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> u8 {
        self.ws();
        *self.b.get(self.i).unwrap_or_else(|| panic!("JSON: unexpected end"))
    }

    fn eat(&mut self, c: u8) {
        assert_eq!(self.peek(), c, "JSON: {:?} expected at byte {}", c as char, self.i);
        self.i += 1;
    }

    fn word(&mut self, w: &str, v: Json) -> Json {
        assert!(self.b[self.i..].starts_with(w.as_bytes()), "JSON: bad token at byte {}", self.i);
        self.i += w.len();
        v
    }

    fn value(&mut self) -> Json {
        match self.peek() {
            b'{' => {
                self.i += 1;
                let mut members = Vec::new();
                if self.peek() == b'}' {
                    self.i += 1;
                    return Json::Obj(members);
                }
                loop {
                    let k = self.string();
                    self.eat(b':');
                    members.push((k, self.value()));
                    if self.peek() == b',' {
                        self.i += 1;
                    } else {
                        self.eat(b'}');
                        return Json::Obj(members);
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                if self.peek() == b']' {
                    self.i += 1;
                    return Json::Arr(items);
                }
                loop {
                    items.push(self.value());
                    if self.peek() == b',' {
                        self.i += 1;
                    } else {
                        self.eat(b']');
                        return Json::Arr(items);
                    }
                }
            }
            b'"' => Json::Str(self.string()),
            b't' => self.word("true", Json::Bool(true)),
            b'f' => self.word("false", Json::Bool(false)),
            b'n' => self.word("null", Json::Null),
            _ => {
                let start = self.i;
                while self.i < self.b.len() && matches!(self.b[self.i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.b[start..self.i]).unwrap();
                Json::Num(text.parse().unwrap_or_else(|_| panic!("JSON: bad number {text:?} at byte {start}")))
            }
        }
    }

    fn string(&mut self) -> String {
        self.eat(b'"');
        let mut out = Vec::new();
        loop {
            let c = *self.b.get(self.i).unwrap_or_else(|| panic!("JSON: unterminated string"));
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).unwrap(),
                b'\\' => {
                    let e = self.b[self.i];
                    self.i += 1;
                    out.push(match e {
                        b'"' | b'\\' | b'/' => e,
                        b'n' => b'\n',
                        _ => panic!("JSON: unsupported escape \\{} at byte {}", e as char, self.i),
                    });
                }
                _ => out.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_fixtures_use() {
        let v = Json::parse(r#" { "a": [1, -2.5, 3e2], "b": { "c": "x\"y" }, "d": true, "e": null, "f": [] } "#);
        assert_eq!(v.at("a").arr(), &[Json::Num(1.0), Json::Num(-2.5), Json::Num(300.0)]);
        assert_eq!(v.at("b").at("c").str(), "x\"y");
        assert!(v.at("d").bool() && v.at("e").is_null() && v.at("f").arr().is_empty());
        assert_eq!(v.get("g"), None);
    }
}
