//! The GPT-2 byte <-> unicode table that byte-level BPE vocabularies are
//! written in (model-spec §5.1), and the streaming UTF-8 decoder.
//!
//! Byte-level vocabularies cannot hold raw bytes in JSON/GGUF strings, so
//! every byte is shown as a printable code point: printable ASCII and most
//! of Latin-1 stand for themselves, the other 68 bytes (controls, space,
//! DEL, NBSP, soft hyphen) are moved to U+0100.. in byte order.

/// `BYTE_TO_CHAR[b]` is the code point that stands for byte `b`.
pub static BYTE_TO_CHAR: [char; 256] = build_table();

const fn printable(b: u8) -> bool {
    matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)
}

const fn build_table() -> [char; 256] {
    let mut t = ['\0'; 256];
    let mut n = 0u32;
    let mut b = 0usize;
    while b < 256 {
        t[b] = if printable(b as u8) {
            b as u8 as char
        } else {
            // 0x100 + n is always a valid scalar value (n < 68).
            match char::from_u32(0x100 + n) {
                Some(c) => c,
                None => '\0',
            }
        };
        if !printable(b as u8) {
            n += 1;
        }
        b += 1;
    }
    t
}

/// The byte a code point stands for, if it is one of the 256 table entries.
pub fn char_to_byte(c: char) -> Option<u8> {
    let u = c as u32;
    if u < 256 && printable(u as u8) {
        return Some(u as u8);
    }
    REMAPPED.get(u.wrapping_sub(0x100) as usize).copied()
}

/// `REMAPPED[n]` is the byte shown as U+0100 + n.
static REMAPPED: [u8; 68] = build_remapped();

const fn build_remapped() -> [u8; 68] {
    let mut t = [0u8; 68];
    let (mut n, mut b) = (0usize, 0usize);
    while b < 256 {
        if !printable(b as u8) {
            t[n] = b as u8;
            n += 1;
        }
        b += 1;
    }
    t
}

/// The 256 byte symbols in GPT-2 `bytes_to_unicode` order (printable bytes
/// first, then the remapped ones). Byte-level vocabularies, GLM's included,
/// start with exactly these tokens in this order.
pub fn byte_symbols_in_vocab_order() -> Vec<char> {
    let mut v: Vec<char> = (0..=255u8)
        .filter(|&b| printable(b))
        .map(|b| BYTE_TO_CHAR[b as usize])
        .collect();
    v.extend(
        (0..=255u8)
            .filter(|&b| !printable(b))
            .map(|b| BYTE_TO_CHAR[b as usize]),
    );
    v
}

/// Byte-level string -> the bytes it stands for. A code point outside the
/// table (a vocab entry that is not pure byte-level) is kept as its own
/// UTF-8 rather than failing, so an odd token degrades to visible text.
pub fn decode_byte_level(s: &str, out: &mut Vec<u8>) {
    let mut buf = [0u8; 4];
    for c in s.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
        }
    }
}

/// Bytes -> byte-level string (the inverse of [`decode_byte_level`]).
pub fn encode_byte_level(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| BYTE_TO_CHAR[b as usize]).collect()
}

/// Turns a stream of token ids into text one token at a time. A token can
/// end in the middle of a multi-byte character (byte-level BPE splits
/// emoji and CJK freely), so bytes are held back until the character is
/// complete; `push` only ever returns whole characters.
pub struct StreamDecoder<'a> {
    tok: crate::shared::Shared<'a, super::Tokenizer>,
    pending: Vec<u8>,
}

impl<'a> StreamDecoder<'a> {
    /// A decoder over a tokenizer borrowed or shared (`Arc`).
    pub fn new(tok: impl Into<crate::shared::Shared<'a, super::Tokenizer>>) -> Self {
        let tok = tok.into();
        StreamDecoder {
            tok,
            pending: Vec::new(),
        }
    }

    /// Add one token; returns the text that became complete (maybe empty).
    /// Bytes that can never become valid UTF-8 are emitted as U+FFFD right
    /// away instead of stalling the stream.
    pub fn push(&mut self, id: u32) -> crate::Result<String> {
        self.tok.render_into(id, &mut self.pending)?;
        let mut out = String::new();
        let mut start = 0;
        loop {
            match std::str::from_utf8(&self.pending[start..]) {
                Ok(s) => {
                    out.push_str(s);
                    start = self.pending.len();
                    break;
                }
                Err(e) => {
                    let good = start + e.valid_up_to();
                    // Safe: from_utf8 just validated this range.
                    out.push_str(
                        std::str::from_utf8(&self.pending[start..good]).unwrap_or_default(),
                    );
                    match e.error_len() {
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            start = good + n;
                        }
                        None => {
                            // An incomplete character at the end: wait for more.
                            start = good;
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start);
        Ok(out)
    }

    /// Bytes held back waiting for the rest of a character.
    pub fn pending_bytes(&self) -> usize {
        self.pending.len()
    }

    /// End of stream: whatever is held back, with U+FFFD for a cut-off
    /// character.
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_gpt2() {
        assert_eq!(BYTE_TO_CHAR[b' ' as usize], '\u{120}'); // Ġ
        assert_eq!(BYTE_TO_CHAR[b'\n' as usize], '\u{10A}'); // Ċ
        assert_eq!(BYTE_TO_CHAR[0], '\u{100}');
        assert_eq!(BYTE_TO_CHAR[b'A' as usize], 'A');
        assert_eq!(BYTE_TO_CHAR[0xAD], '\u{143}'); // soft hyphen is the last remapped
        let mut seen = std::collections::HashSet::new();
        for b in 0..=255u8 {
            let c = BYTE_TO_CHAR[b as usize];
            assert!(seen.insert(c));
            assert_eq!(char_to_byte(c), Some(b));
        }
        assert_eq!(char_to_byte('\u{144}'), None);
        assert_eq!(char_to_byte('中'), None);
        let order = byte_symbols_in_vocab_order();
        assert_eq!(order.len(), 256);
        assert_eq!(&order[..3], &['!', '"', '#']);
    }

    #[test]
    fn byte_level_round_trip() {
        let text = "héllo 世界 🦀\n\t\u{0}";
        let enc = encode_byte_level(text.as_bytes());
        let mut dec = Vec::new();
        decode_byte_level(&enc, &mut dec);
        assert_eq!(dec, text.as_bytes());
    }
}
