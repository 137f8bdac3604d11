import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { DigestFilter } from "../src/core/digest-filter.js";

const digest = (i: number) => new Uint8Array(createHash("sha256").update(`d${i}`).digest());

describe("DigestFilter", () => {
  it("says maybe to everything until it is complete", () => {
    const filter = new DigestFilter();
    expect(filter.mayHold(digest(1))).toBe(true);
    filter.complete();
    expect(filter.mayHold(digest(1))).toBe(false);
  });

  it("never says no to a digest it was given, across the segments it grows", () => {
    const filter = new DigestFilter(1_024);
    for (let i = 0; i < 20_000; i++) filter.add(digest(i));
    filter.complete();
    for (let i = 0; i < 20_000; i++) expect(filter.mayHold(digest(i))).toBe(true);
    // 1 024 + 2 048 + ... + 16 384 holds 31 744: five segments, 2 bytes per digest of capacity.
    expect(filter.bytes).toBe(31_744 * 2);
  });

  it("says maybe to few digests it was never given", () => {
    const filter = new DigestFilter(1_024);
    for (let i = 0; i < 20_000; i++) filter.add(digest(i));
    filter.complete();
    let maybes = 0;
    for (let i = 20_000; i < 120_000; i++) if (filter.mayHold(digest(i))) maybes++;
    // About 1 in 1 400 per segment, five segments: well under 1%.
    expect(maybes / 100_000).toBeLessThan(0.01);
  });
});
