//! JSON-RPC framing on an OVSDB stream: messages are JSON texts one after
//! another with nothing between them but white space (RFC 7047 §4; no
//! length prefix, no newline required). [`Framer`] takes bytes as they
//! come and hands out each complete text, whatever the read boundaries.
//!
//! It finds a text's end by counting brackets outside strings (with their
//! escapes), without parsing it; the text is parsed afterwards (a `]`
//! closing a `{` ends a text that the parser then refuses). A text
//! larger than the limit, or bytes that cannot begin one, end the stream
//! with an error: a peer that sends them is not an OVSDB peer.

/// Why the stream cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A message longer than the limit (bytes).
    TooLong(usize),
    /// A byte that cannot start a JSON-RPC message (an object).
    NotAnObject(u8),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLong(n) => write!(f, "a JSON-RPC message longer than {n} bytes"),
            FrameError::NotAnObject(b) => {
                write!(
                    f,
                    "byte {b:#04x} where a JSON-RPC message (an object) should begin"
                )
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// The longest message a [`Framer`] takes by default (OVS's own JSON-RPC
/// has no limit; a database of 10^3 ports with their rows is a few MB).
pub const DEFAULT_MAX_MESSAGE: usize = 64 << 20;

/// Splits a byte stream into JSON texts.
#[derive(Debug)]
pub struct Framer {
    buf: Vec<u8>,
    /// Where the scan goes on in `buf`.
    pos: usize,
    /// Where the current text starts in `buf` (None: between texts).
    start: Option<usize>,
    depth: usize,
    in_string: bool,
    escaped: bool,
    max: usize,
    failed: Option<FrameError>,
}

impl Default for Framer {
    fn default() -> Self {
        Framer::new(DEFAULT_MAX_MESSAGE)
    }
}

impl Framer {
    /// A framer that refuses messages longer than `max` bytes.
    pub fn new(max: usize) -> Self {
        Framer {
            buf: Vec::new(),
            pos: 0,
            start: None,
            depth: 0,
            in_string: false,
            escaped: false,
            max,
            failed: None,
        }
    }

    /// Takes bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes taken but not yet handed out (a partial message).
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start.unwrap_or(self.pos.min(self.buf.len()))
    }

    /// The next complete text, if one has arrived. After an error every
    /// call gives the same error.
    pub fn next_message(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        while self.pos < self.buf.len() {
            let b = self.buf[self.pos];
            self.pos += 1;
            let Some(start) = self.start else {
                match b {
                    b' ' | b'\t' | b'\r' | b'\n' => continue,
                    b'{' => {
                        self.start = Some(self.pos - 1);
                        self.depth = 1;
                        continue;
                    }
                    _ => return Err(self.fail(FrameError::NotAnObject(b))),
                }
            };
            if self.pos - start > self.max {
                return Err(self.fail(FrameError::TooLong(self.max)));
            }
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        let msg = self.buf[start..self.pos].to_vec();
                        self.buf.drain(..self.pos);
                        self.pos = 0;
                        self.start = None;
                        return Ok(Some(msg));
                    }
                }
                _ => {}
            }
        }
        if self.start.is_none() {
            // Only white space so far: nothing to keep.
            self.buf.clear();
            self.pos = 0;
        } else if self.buf.len() - self.start.unwrap_or(0) > self.max {
            return Err(self.fail(FrameError::TooLong(self.max)));
        }
        Ok(None)
    }

    fn fail(&mut self, e: FrameError) -> FrameError {
        self.failed = Some(e.clone());
        self.buf = Vec::new();
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(f: &mut Framer) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(m) = f.next_message().unwrap() {
            out.push(m);
        }
        out
    }

    #[test]
    fn texts_back_to_back_with_strings_and_escapes() {
        let mut f = Framer::default();
        f.push(br#" {"a":"}{\"\\"} {"id":1,"x":[{"y":"]"}]}"#);
        f.push(b"\n{\"b\":");
        let got = all(&mut f);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], br#"{"a":"}{\"\\"}"#);
        assert_eq!(got[1], br#"{"id":1,"x":[{"y":"]"}]}"#);
        assert!(f.pending() > 0);
        f.push(b"2}");
        assert_eq!(all(&mut f), vec![b"{\"b\":2}".to_vec()]);
    }

    #[test]
    fn garbage_and_oversize_end_the_stream() {
        let mut f = Framer::default();
        f.push(b"x{}");
        assert_eq!(f.next_message(), Err(FrameError::NotAnObject(b'x')));
        assert_eq!(f.next_message(), Err(FrameError::NotAnObject(b'x')));
        let mut f = Framer::new(8);
        f.push(b"{\"aaaaaaaaaaaa");
        assert_eq!(f.next_message(), Err(FrameError::TooLong(8)));
        // Brackets are counted, not matched: the parser refuses "{]".
        let mut f = Framer::default();
        f.push(b"{]]");
        assert_eq!(f.next_message(), Ok(Some(b"{]".to_vec())));
        assert_eq!(f.next_message(), Err(FrameError::NotAnObject(b']')));
    }

    proptest! {
        /// Wherever the stream is cut, the same messages come out.
        #[test]
        fn any_split_gives_the_same_messages(
            vals in proptest::collection::vec(
                proptest::collection::btree_map("[a-z\"\\\\{}\\[\\]]{0,6}", any::<i32>(), 0..4), 1..5),
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            let texts: Vec<String> = vals.iter().map(|m| serde_json::to_string(m).unwrap()).collect();
            let stream = texts.join(" \n");
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (stream.len() + 1)).collect();
            cuts.sort_unstable();
            let mut f = Framer::default();
            let mut got = Vec::new();
            let mut last = 0;
            for c in cuts.into_iter().chain([stream.len()]) {
                f.push(&stream.as_bytes()[last..c]);
                last = c;
                got.extend(all(&mut f));
            }
            let got: Vec<String> = got.into_iter().map(|m| String::from_utf8(m).unwrap()).collect();
            prop_assert_eq!(got, texts);
        }
    }
}
