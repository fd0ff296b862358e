//! PostgreSQL's configuration files, `postgresql.conf` and `postgresql.auto.conf` (`guc-file.l`).

use std::collections::BTreeMap;

/// Parses PostgreSQL configuration-file text (`name = value # comment`) into lower-case names and
/// unquoted values; later lines win. `include` directives are returned under the key `include`.
pub fn pg_conf(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for raw in text.lines() {
        let line = strip_conf_comment(raw).trim().to_string();
        if line.is_empty() {
            continue;
        }
        let (name, value) = match line.split_once('=') {
            Some((n, v)) => (n.trim(), v.trim()),
            None => match line.split_once(char::is_whitespace) {
                Some((n, v)) => (n.trim(), v.trim()),
                None => continue,
            },
        };
        let value = value
            .strip_prefix('\'')
            .and_then(|v| v.strip_suffix('\''))
            .unwrap_or(value)
            .replace("''", "'");
        map.insert(name.to_ascii_lowercase(), value);
    }
    map
}

fn strip_conf_comment(line: &str) -> &str {
    let mut in_quote = false;
    for (i, c) in line.char_indices() {
        match c {
            '\'' => in_quote = !in_quote,
            '#' if !in_quote => return &line[..i],
            _ => {}
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pg_conf_syntax() {
        let c = pg_conf("shared_buffers = 128MB  # min 128kB\nhuge_pages='on'\n#max_connections = 50\nMax_Connections 200\nlisten_addresses = 'a#b'\n");
        assert_eq!(c["shared_buffers"], "128MB");
        assert_eq!(c["huge_pages"], "on");
        assert_eq!(c["max_connections"], "200");
        assert_eq!(c["listen_addresses"], "a#b");
    }
}
