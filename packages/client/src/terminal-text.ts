// What the CLI's human-readable output may write to a terminal: caller-chosen ids and texts with every control and
// invisible character shown as an escape, so none of them can colour, move, retitle or hide what is printed.

/**
 * Characters a text must not carry to a terminal: controls (C0, DEL, C1: ESC,
 * CSI, OSC, BEL, CR, NUL...), format characters (bidi overrides and isolates,
 * zero-width ones) and the line and paragraph separators. Newline and tab stay,
 * as the layout of a message; so do the zero-width (non-)joiner, which emoji
 * sequences and several scripts are written with.
 */
const unsafeInText = /(?![\n\t\u200c\u200d])[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;

/**
 * Characters that make an id other than plain: the above without exception,
 * the other default-ignorable (invisible) ones, and any whitespace, since an
 * id is printed on one line beside other columns.
 */
const notPlainInId = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Default_Ignorable_Code_Point}\p{White_Space}]/u;

/** What is still escaped inside a JSON-quoted id (JSON.stringify has done C0, '"', '\' and lone surrogates). */
const unsafeInQuotedId = /(?! )[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}\p{White_Space}]/gu;

const shortEscapes: Readonly<Record<string, string>> = { "\b": "\\b", "\f": "\\f", "\r": "\\r" };

/** JSON's escapes: the short ones, else \uXXXX per UTF-16 unit. */
function escaped(character: string): string {
  const short = shortEscapes[character];
  if (short) return short;
  let out = "";
  for (let i = 0; i < character.length; i++) out += `\\u${character.charCodeAt(i).toString(16).padStart(4, "0")}`;
  return out;
}

/** A message, description or error text for the terminal: newlines and tabs kept, the rest escaped. */
export function terminalText(text: string): string {
  return text.replace(unsafeInText, escaped);
}

/**
 * An id (contextId, conversation id, target name) for the terminal: as it is
 * when plain, else JSON-quoted with every invisible character escaped, so an
 * empty or blank id shows as "" or " " and JSON.parse of the quoted form gives
 * back the exact id. An id that starts with a quote is quoted too, so a quoted
 * form is never mistaken for a plain one.
 */
export function terminalId(id: string): string {
  if (id !== "" && !id.startsWith('"') && !notPlainInId.test(id)) return id;
  return JSON.stringify(id).replace(unsafeInQuotedId, escaped);
}
