//! Man pages and shell completions from the command line's own
//! definition (clap), so that they say what `--help` says: `sluice man
//! DIR` writes `sluice.8` and one page per subcommand (`sluice-run.8`,
//! ...), `sluice completions SHELL` prints the completion script.

use std::path::Path;

/// Writes the man pages of `cmd` (the `sluice` command) into `dir`:
/// `sluice.8` and `sluice-SUB.8` for each subcommand. Returns the files.
pub fn write_man_pages(cmd: &clap::Command, dir: &Path) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut written = Vec::new();
    let mut page = |c: clap::Command, name: String| -> Result<(), String> {
        let file = dir.join(format!("{name}.8"));
        let mut out = Vec::new();
        let bin = name.replacen('-', " ", 1);
        clap_mangen::Man::new(c.display_name(name.clone()).bin_name(bin))
            .section("8")
            .render(&mut out)
            .map_err(|e| format!("{name}: {e}"))?;
        std::fs::write(&file, out).map_err(|e| format!("{}: {e}", file.display()))?;
        written.push(file.display().to_string());
        Ok(())
    };
    let root = cmd.clone();
    for sub in root.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        page(sub.clone(), format!("sluice-{}", sub.get_name()))?;
    }
    page(root, "sluice".to_string())?;
    Ok(written)
}

/// Prints the completion script of `cmd` for `shell`.
pub fn print_completions(cmd: &mut clap::Command, shell: clap_complete::Shell) {
    clap_complete::generate(shell, cmd, "sluice", &mut std::io::stdout());
}
