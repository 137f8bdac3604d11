import { describe, expect, it } from "vitest";
import {
  currentToken,
  firstPage,
  hasNext,
  hasPrevious,
  nextPage,
  pageLabel,
  previousPage,
  withNextToken,
} from "../src/logic/paging.js";

describe("paging", () => {
  it("walks forward with the server's tokens and back with the remembered ones", () => {
    let p = firstPage;
    expect(hasPrevious(p)).toBe(false);
    expect(hasNext(p)).toBe(false);
    expect(nextPage(p)).toBe(p);
    p = withNextToken(p, "t2");
    expect(hasNext(p)).toBe(true);
    p = nextPage(p);
    expect([currentToken(p), pageLabel(p)]).toEqual(["t2", "page 2"]);
    p = nextPage(withNextToken(p, "t3"));
    expect(currentToken(p)).toBe("t3");
    p = withNextToken(p, "");
    expect(hasNext(p)).toBe(false);
    p = previousPage(p);
    expect([currentToken(p), p.index]).toEqual(["t2", 1]);
    p = previousPage(p);
    expect(currentToken(p)).toBe("");
    expect(previousPage(p)).toBe(p);
  });

  it("forgets the pages after the current one when a different next page is taken", () => {
    let p = nextPage(withNextToken(firstPage, "a"));
    p = nextPage(withNextToken(p, "b"));
    p = previousPage(previousPage(p));
    p = nextPage(withNextToken(p, "a2"));
    expect(p.tokens).toEqual(["", "a2"]);
  });
});
