// Plain-text tables for a terminal: the CLI's listings (threads list, send --list, unknown-target errors).
/** Columns a string takes in a terminal, counted in code points (so a surrogate pair is one). */
function columns(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/**
 * Rows of cells as lines whose columns line up: each column as wide as its widest cell, two spaces between
 * columns, numbers and counts right-aligned where `align` says so, no trailing spaces.
 */
export function alignedRows(rows: readonly (readonly string[])[], align: readonly ("left" | "right")[]): string {
  const widths = align.map((_, i) => Math.max(0, ...rows.map((row) => columns(row[i] ?? ""))));
  const lines = rows.map((row) =>
    row
      .map((cell, i) => {
        const pad = " ".repeat(widths[i]! - columns(cell));
        return align[i] === "right" ? pad + cell : i === row.length - 1 ? cell : cell + pad;
      })
      .join("  "),
  );
  return `${lines.join("\n")}\n`;
}
