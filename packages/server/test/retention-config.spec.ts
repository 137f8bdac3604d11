// The retention settings: off unless set, a malformed value stops the start, overrides must name real tenants.
import { describe, expect, it } from "vitest";
import { loadConfig } from "../src/config/load-config.js";
import { ConfigError } from "../src/config/sources.js";
import { retentionPolicy, retentionQuery } from "../src/retention/retention-policy.js";

function problemsOf(run: () => unknown): string[] {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error.problems.map((p) => `${p.path}: ${p.message}`);
    throw error;
  }
  throw new Error("the configuration was accepted");
}

const keys = "ka=alpha,kb=beta";

describe("retention settings", () => {
  it("is off by default: no pass ever runs", () => {
    const policy = retentionPolicy(loadConfig({ env: {} }));
    expect(policy).toMatchObject({ enabled: false, defaultDays: undefined });
    expect(policy.summary).toContain("retention: off");
  });

  it("reads days and per-tenant overrides from the environment", () => {
    const config = loadConfig({
      env: { PARLEY_API_KEYS: keys, PARLEY_RETENTION_DAYS: "30", PARLEY_RETENTION_TENANT_DAYS: "alpha=7, beta=off" },
    });
    expect(config.retention).toEqual({ threadIdleDays: 30, tenants: { alpha: 7, beta: "off" }, intervalMs: 60_000 });
    const policy = retentionPolicy(config);
    expect(policy.enabled).toBe(true);
    expect(policy.summary).toBe(
      "retention: threads idle for more than 30 days are deleted with their tasks, push configs and event logs (per tenant: alpha: 7 days, beta: off)",
    );
    const query = retentionQuery(policy, 100 * 86_400_000, 10, () => false);
    expect(query.idleBefore).toBe(70 * 86_400_000);
    expect([...query.tenants!]).toEqual([
      ["alpha", 93 * 86_400_000],
      ["beta", undefined],
    ]);
  });

  it("refuses malformed values instead of switching retention off (or on)", () => {
    for (const value of ["0", "-3", "30d", "1.5", "off", "36501"]) {
      expect(problemsOf(() => loadConfig({ env: { PARLEY_RETENTION_DAYS: value } }))[0]).toMatch(
        /^retention\.threadIdleDays: /,
      );
    }
    expect(
      problemsOf(() => loadConfig({ env: { PARLEY_API_KEYS: keys, PARLEY_RETENTION_TENANT_DAYS: "alpha=7d" } })),
    ).toEqual(['retention.tenants.alpha: expected a whole number of days from 1 to 36500, or "off"']);
    expect(
      problemsOf(() => loadConfig({ env: { PARLEY_API_KEYS: keys, PARLEY_RETENTION_TENANT_DAYS: "gamma=7" } })),
    ).toEqual(['retention.tenants.gamma: no API key maps to tenant "gamma"; the tenants are "alpha", "beta"']);
    // In open mode the one tenant is "default".
    expect(loadConfig({ env: { PARLEY_RETENTION_TENANT_DAYS: "default=5" } }).retention.tenants).toEqual({
      default: 5,
    });
    expect(problemsOf(() => loadConfig({ env: { PARLEY_RETENTION_TENANT_DAYS: "alpha=5" } }))[0]).toContain(
      "(open mode)",
    );
  });
});
