import { describe, expect, it } from "vitest";
import { RecentMap, RecentPairMap } from "../src/core/recent-map.js";

describe("RecentMap", () => {
  it("drops the older generation when the newer fills, moves a hit forward, and deletes from both", () => {
    const map = new RecentMap<string, number>(3);
    map.set("a", 0);
    map.set("b", 1);
    map.set("c", 2);
    // The newer generation is full: a, b, c become the older one.
    map.set("d", 3);
    expect(map.get("a")).toBe(0);
    // Moving b forward fills the newer generation (d, a, b), which becomes the older: c is dropped.
    expect(map.get("b")).toBe(1);
    expect(map.get("c")).toBeUndefined();
    expect([map.get("d"), map.get("a")]).toEqual([3, 0]);
    // A newer value shadows the older one; a delete removes both.
    map.set("b", 10);
    expect(map.get("b")).toBe(10);
    map.delete("b");
    map.delete("d");
    expect([map.get("b"), map.get("d"), map.get("a")]).toEqual([undefined, undefined, 0]);
  });
});

describe("RecentMap's onDrop", () => {
  it("hears of every entry the older generation takes with it, and not of one moved or set into the newer", () => {
    const dropped: string[] = [];
    const map = new RecentMap<string, number>(2, (key, value) => dropped.push(`${key}=${value}`));
    map.set("a", 0);
    map.set("b", 1); // a, b are now the older generation
    expect(map.get("a")).toBe(0); // moved forward
    map.set("b", 2); // set again: newer (a, b) fills and becomes the older; the old generation goes
    expect(dropped).toEqual([]);
    map.set("c", 3);
    map.set("d", 4); // (a, b) dropped
    expect(dropped).toEqual(["a=0", "b=2"]);
    map.delete("c");
    map.set("e", 5);
    map.set("f", 6); // (d) dropped; c was deleted before
    expect(dropped).toEqual(["a=0", "b=2", "d=4"]);
  });
});

describe("RecentPairMap", () => {
  it("keeps pairs apart that one joined key would merge, and counts entries, not first keys, for its generations", () => {
    const map = new RecentPairMap<number>(3);
    map.set("a", "bc", 0);
    map.set("ab", "c", 1);
    expect([map.get("a", "bc"), map.get("ab", "c"), map.get("abc", ""), map.get("a", "b")]).toEqual([
      0,
      1,
      undefined,
      undefined,
    ]);
    // Replacing a value adds no entry; a third entry under an existing first key fills the newer generation.
    map.set("a", "bc", 2);
    map.set("a", "x", 3);
    // Now the older generation: a hit moves forward, and the next two new entries drop the rest.
    expect(map.get("ab", "c")).toBe(1);
    map.set("d", "e", 4);
    map.set("d", "f", 5);
    expect([map.get("a", "bc"), map.get("a", "x"), map.get("ab", "c"), map.get("d", "e")]).toEqual([
      undefined,
      undefined,
      1,
      4,
    ]);
  });
});
