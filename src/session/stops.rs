//! Stop strings over streamed text: text that could still grow into a stop
//! string is held back, so a stop string is never shown, even when it
//! arrives split across tokens.

#[derive(Default)]
pub struct StopStrings {
    stops: Vec<String>,
    /// This generation's text not yet released.
    held: String,
    /// A stop string was reached; the next token is not generated.
    hit: bool,
}

impl StopStrings {
    /// Empty strings would match everywhere; llama.cpp ignores them too.
    pub fn new(stops: &[String]) -> StopStrings {
        StopStrings {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            ..Default::default()
        }
    }

    /// A new generation: nothing held, no stop reached.
    pub fn restart(&mut self) {
        self.held.clear();
        self.hit = false;
    }

    /// Add a token's text; returns the text now safe to show. At a stop
    /// string that is the text before it, and the rest is dropped.
    pub fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        if let Some(at) = self.stops.iter().filter_map(|s| self.held.find(s)).min() {
            self.held.truncate(at);
            self.hit = true;
            return std::mem::take(&mut self.held);
        }
        let keep = self.partial_match();
        self.held.drain(..self.held.len() - keep).collect()
    }

    /// Whether a stop string was reached (once: the flag clears).
    pub fn take_hit(&mut self) -> bool {
        std::mem::take(&mut self.hit)
    }

    pub fn held(&self) -> &str {
        &self.held
    }

    /// Length of the longest tail of the held text that begins some stop
    /// string (it may yet complete one).
    fn partial_match(&self) -> usize {
        let text = &self.held;
        let mut n = 0;
        for s in &self.stops {
            for k in (1..s.len().min(text.len() + 1)).rev() {
                let tail = text.len() - k;
                if text.is_char_boundary(tail) && s.starts_with(&text[tail..]) {
                    n = n.max(k);
                    break;
                }
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::StopStrings;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool, String) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut s = StopStrings::new(&stops);
        let mut shown = String::new();
        for p in pieces {
            shown.push_str(&s.push(p));
            if s.hit {
                break;
            }
        }
        (shown, s.hit, s.held.clone())
    }

    #[test]
    fn a_stop_split_across_pieces_is_never_shown() {
        let (shown, hit, held) = run(&["END"], &["abc E", "N", "D more"]);
        assert_eq!((shown.as_str(), hit, held.as_str()), ("abc ", true, ""));
    }

    #[test]
    fn a_partial_match_that_fails_is_released() {
        let (shown, hit, held) = run(&["END"], &["abc E", "NX", " E"]);
        assert_eq!(
            (shown.as_str(), hit, held.as_str()),
            ("abc ENX ", false, "E")
        );
    }

    #[test]
    fn empty_stop_strings_are_ignored() {
        let (shown, hit, _) = run(&[""], &["a", "b"]);
        assert_eq!((shown.as_str(), hit), ("ab", false));
    }
}
