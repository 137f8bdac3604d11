import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext, Locator, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningBridge, startBridge } from "./bridge-process.js";
import { launchBrowser } from "./browser.js";
import { startTcpProxy, type TcpProxy } from "./tcp-proxy.js";

/**
 * Drives the real console in headless Chromium against a real Parley: the
 * `parley-bridge` binary in embedded mode, serving the console at /console/
 * and the Connect RPCs on the same port, reached through a TCP relay the test
 * can cut to make a network blip. Screenshots go to
 * PARLEY_SCREENSHOTS (default: a temp directory, printed at the end).
 */
const agents = [
  // Streams its reply in 12 chunks 150 ms apart: visible growth.
  { name: "echo", type: "echo", options: { delayMs: 150, chunks: 12 } },
  // 12 chunks 300 ms apart: a stream that outlives a network blip.
  { name: "steady", type: "echo", options: { delayMs: 300, chunks: 12 } },
  // 30 chunks a second apart: long enough to cancel.
  { name: "slow", type: "echo", options: { delayMs: 1000, chunks: 30 } },
  // Two scripted agents for an agent-to-agent conversation.
  // Two scripted agents for an agent-to-agent conversation, 400 ms per step so its phases can be watched.
  {
    name: "planner",
    type: "script",
    options: {
      replies: [
        { reply: "Did the tests pass on main?", delayMs: 400 },
        { reply: "Good.\nREPLY_SKIP", delayMs: 400 },
      ],
    },
  },
  {
    name: "builder",
    type: "script",
    options: {
      replies: [
        { reply: "The build is green.", delayMs: 400 },
        { reply: "Yes, all 412 tests passed.", delayMs: 400 },
        { reply: "Release 0.4 is out.", delayMs: 400 },
      ],
    },
  },
];

/** Per test; each wait inside one gives up sooner, so a failure names what it waited for. */
const timeout = 90_000;
const wait = 30_000;
const screenshots = process.env.PARLEY_SCREENSHOTS ?? mkdtempSync(join(tmpdir(), "parley-console-shots-"));
const runBase = Date.now().toString(36);

/** A phone's width and a laptop's: every step runs at both, and the page never scrolls sideways. */
describe.each([1280, 360])("the console %i px wide in a real browser against a real Parley", (width) => {
  const run = `${runBase}w${width}`;
  let bridge: RunningBridge;
  let proxy: TcpProxy;
  let browser: Awaited<ReturnType<typeof launchBrowser>>;
  let context: BrowserContext;
  let page: Page;
  const pageErrors: string[] = [];

  const view = (name: "threads" | "sessions" | "tasks"): Locator => page.locator(`[data-view="${name}"]`);
  const shot = async (name: string) => {
    await page.screenshot({ path: join(screenshots, `${name}-${width}.png`) });
    // Nothing is cut off: the page is no wider than the window.
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow, `the page at ${width} px is ${overflow} px wider than the window (${name})`).toBeLessThanOrEqual(
      0,
    );
  };
  const replyOf = (scope: Locator) => scope.getByRole("region", { name: "reply" });
  const stateOf = (reply: Locator) => reply.getAttribute("data-state");

  beforeAll(async () => {
    mkdirSync(screenshots, { recursive: true });
    bridge = await startBridge({ agents }, { PARLEY_API_KEYS: "key-alice=alice,key-bob=bob" });
    proxy = await startTcpProxy(new URL(bridge.url));
    browser = await launchBrowser();
    context = browser.context;
    page = context.pages()[0] ?? (await context.newPage());
    await page.setViewportSize({ width, height: 860 });
    page.on("pageerror", (e) => pageErrors.push(e.message));
    // Starting a Node process and Chromium takes long while the whole suite runs on two shared cores.
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await proxy?.close();
    await bridge?.stop();
    console.log(`console screenshots: ${screenshots}`);
  });

  it(
    "opens, refuses to show anything without a key, then names the key's tenant",
    async () => {
      const response = await page.goto(`${proxy.url}console/`);
      expect(response?.status()).toBe(200);
      const tenant = page.getByRole("status", { name: "tenant" });
      await expect.poll(() => tenant.textContent(), { timeout: wait }).toBe("not connected");
      await expect.poll(() => page.getByRole("alert").first().textContent()).toContain("missing credentials");
      await page.getByLabel("API key", { exact: true }).fill("key-alice");
      await page.getByRole("button", { name: "Connect" }).click();
      await expect.poll(() => tenant.textContent(), { timeout: wait }).toBe("tenant alice");
    },
    timeout,
  );

  it(
    "creates a thread, sends a message and shows the reply growing until it completes",
    async () => {
      const threads = view("threads");
      await threads.getByRole("combobox", { name: "Agent", exact: true }).selectOption("echo");
      await threads.getByLabel("Context id", { exact: true }).fill(`e2e-${run}`);
      await threads.getByLabel("Message", { exact: true }).fill("hello from the browser");
      // The page records the reply's length at every change itself, so a slow test process misses no step.
      await page.evaluate(() => {
        const seen: number[] = [];
        (window as unknown as { replyLengths: number[] }).replyLengths = seen;
        new MutationObserver(() => {
          const length = document.querySelector('[data-view="threads"] .reply-text')?.textContent?.length ?? 0;
          if (seen.at(-1) !== length) seen.push(length);
        }).observe(document.body, { subtree: true, childList: true, characterData: true });
      });
      await threads.getByRole("button", { name: "Send" }).click();
      const reply = replyOf(threads);
      const text = reply.getByRole("log", { name: "reply text" });
      const deadline = Date.now() + wait;
      let shot4 = false;
      while (Date.now() < deadline) {
        if ((await reply.count()) > 0) {
          if ((await stateOf(reply)) === "completed") break;
          if (!shot4 && ((await text.textContent()) ?? "").length > 0) {
            shot4 = true;
            await shot("reply-streaming");
          }
        }
        await page.waitForTimeout(40);
      }
      const lengths = await page.evaluate(() => (window as unknown as { replyLengths: number[] }).replyLengths);
      expect(await stateOf(reply)).toBe("completed");
      // The reply arrived in many steps, each longer than the one before.
      expect(lengths.filter((n) => n > 0).length).toBeGreaterThanOrEqual(4);
      expect([...lengths].sort((a, b) => a - b)).toEqual(lengths);
      expect(await text.textContent()).toContain("hello from the browser");
      const stateSteps = await reply.getByRole("list", { name: "task states" }).textContent();
      expect(stateSteps).toMatch(/working.*completed/);
      await shot("reply-completed");
      // The console opens the thread it just wrote to, with both messages in its history.
      await expect
        .poll(() => threads.getByRole("heading", { level: 2 }).first().textContent(), { timeout: wait })
        .toBe(`e2e-${run}`);
      await expect
        .poll(() => threads.getByRole("list", { name: "history" }).locator("li").count(), { timeout: wait })
        .toBe(2);
    },
    timeout,
  );

  it(
    "finds the thread in the list and shows its history with roles, provenance and times",
    async () => {
      const threads = view("threads");
      const item = threads.getByRole("button", { name: new RegExp(`e2e-${run}`) });
      await item.waitFor({ timeout: wait });
      await item.click();
      const history = threads.getByRole("list", { name: "history" });
      await expect.poll(() => history.locator("li").count(), { timeout: wait }).toBe(2);
      const first = await history.locator("li").nth(0).textContent();
      const second = await history.locator("li").nth(1).textContent();
      // The role once: the provenance is shown only where it says more than the role.
      expect(first).toMatch(/#1\s*user\s*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/);
      expect(first).toContain("hello from the browser");
      expect(second).toMatch(/#2\s*agent\s*\d{4}-/);
      await shot("thread-history");
    },
    timeout,
  );

  it(
    "survives a network blip: the reply resumes and nothing is shown twice",
    async () => {
      const threads = view("threads");
      const composer = threads.locator(".composer");
      await composer.getByRole("combobox", { name: "Agent", exact: true }).selectOption("steady");
      await composer.getByLabel("Message", { exact: true }).fill("a reply that outlives a network blip");
      await composer.getByRole("button", { name: "Send" }).click();
      const reply = replyOf(composer);
      const text = reply.getByRole("log", { name: "reply text" });
      await expect.poll(async () => ((await text.textContent()) ?? "").length, { timeout: wait }).toBeGreaterThan(0);
      await shot("thread-live");
      proxy.blip(600);
      await expect.poll(() => reply.getAttribute("data-link"), { timeout: wait }).toBe("reconnecting");
      await expect.poll(() => stateOf(reply), { timeout: wait }).toBe("completed");
      expect(await reply.textContent()).toMatch(/resumed \d+×/);
      // What the page shows is exactly what the server stored as the reply: no chunk lost or doubled.
      const history = threads.getByRole("list", { name: "history" });
      await expect.poll(() => history.locator("li").count(), { timeout: wait }).toBe(4);
      const stored = await history.locator("li").nth(3).locator("pre").textContent();
      expect(await text.textContent()).toBe(stored);
    },
    timeout,
  );

  it(
    "cancels a slow task while it streams",
    async () => {
      const threads = view("threads");
      await threads.getByRole("button", { name: "New thread" }).click();
      await threads.getByRole("combobox", { name: "Agent", exact: true }).selectOption("slow");
      await threads.getByLabel("Context id", { exact: true }).fill(`slow-${run}`);
      await threads.getByLabel("Message", { exact: true }).fill("take your time");
      await threads.getByRole("button", { name: "Send" }).click();
      const reply = replyOf(threads);
      await expect.poll(() => stateOf(reply), { timeout: wait }).toBe("working");
      await expect
        .poll(async () => ((await reply.getByRole("log").textContent()) ?? "").length, { timeout: wait })
        .toBeGreaterThan(0);
      await reply.getByRole("button", { name: "Cancel task" }).click();
      await expect.poll(() => stateOf(reply), { timeout: wait }).toBe("canceled");
      expect(await reply.getByRole("button", { name: "Cancel task" }).isDisabled()).toBe(true);
    },
    timeout,
  );

  it(
    "says a thread is busy, naming the running task, and lets it be canceled",
    async () => {
      const threads = view("threads");
      await threads.getByRole("button", { name: "New thread" }).click();
      await threads.getByRole("combobox", { name: "Agent", exact: true }).selectOption("slow");
      await threads.getByLabel("Context id", { exact: true }).fill(`busy-${run}`);
      await threads.getByLabel("Message", { exact: true }).fill("first");
      await threads.getByRole("button", { name: "Send" }).click();
      await expect.poll(() => stateOf(replyOf(threads)), { timeout: wait }).toBe("working");
      // Open the same thread by its contextId (search + Enter) and send into it again.
      await threads.getByLabel("search by context id", { exact: true }).fill(`busy-${run}`);
      await threads.getByLabel("search by context id", { exact: true }).press("Enter");
      const composer = threads.locator(".composer");
      await composer.getByLabel("Message", { exact: true }).fill("second");
      await composer.getByLabel("Message", { exact: true }).press("Control+Enter");
      const alert = composer.getByRole("alert");
      await alert.waitFor({ timeout: wait });
      expect(await alert.textContent()).toMatch(/busy.*task .* is still running/);
      await shot("busy");
      await composer.getByRole("button", { name: "Cancel the running task" }).click();
      await expect.poll(() => alert.count(), { timeout: wait }).toBe(0);
      await composer.getByRole("button", { name: "Send" }).click();
      await expect.poll(() => stateOf(replyOf(composer)), { timeout: wait }).toBe("working");
      await composer.getByLabel("Message", { exact: true }).press("Escape");
      await expect.poll(() => stateOf(replyOf(composer)), { timeout: wait }).toBe("canceled");
    },
    timeout,
  );

  it(
    "runs a Converse between two agents and shows every phase and the stop reason",
    async () => {
      await page.locator("body").click({ position: { x: 5, y: 400 } });
      await page.keyboard.press("2");
      const sessions = view("sessions");
      await sessions.waitFor({ state: "visible" });
      const requester = sessions.getByRole("group", { name: "Requester" });
      const target = sessions.getByRole("group", { name: "Target" });
      await requester.getByRole("combobox", { name: "Agent", exact: true }).selectOption("planner");
      await requester.getByLabel("Context id", { exact: true }).fill(`planner-${run}`);
      await target.getByRole("combobox", { name: "Agent", exact: true }).selectOption("builder");
      await target.getByLabel("Context id", { exact: true }).fill(`builder-${run}`);
      await sessions.getByLabel("Ping-pong turns", { exact: true }).fill("3");
      await sessions.getByLabel("Request", { exact: true }).fill("Is the release ready?");
      await sessions.getByRole("button", { name: "Converse" }).click();
      // The phases as the page showed them while the conversation ran.
      const watched: string[] = [];
      const conversation = sessions.getByRole("region", { name: "conversation" });
      const stop = sessions.getByRole("region", { name: "stop reason" });
      const deadline = Date.now() + wait;
      while (Date.now() < deadline && (await stop.count()) === 0) {
        const phase = (await conversation.count()) > 0 ? await conversation.getAttribute("data-phase") : null;
        if (phase && watched.at(-1) !== phase) watched.push(phase);
        await page.waitForTimeout(50);
      }
      await stop.waitFor({ timeout: wait });
      // Round one and ping-pong were on screen while they ran (announce and done follow each other at once).
      expect(watched).toEqual(expect.arrayContaining(["round one", "ping pong"]));
      expect(watched.indexOf("round one")).toBeLessThan(watched.indexOf("ping pong"));
      const steps = await sessions.getByRole("list", { name: "steps" }).locator("li").allTextContents();
      const phases = steps.map((s) => /^#\d+(accepted|round one|ping pong|announce|done)/.exec(s)?.[1]);
      expect(phases[0]).toBe("accepted");
      expect(phases[1]).toBe("round one");
      expect(phases).toContain("ping pong");
      expect(phases).toContain("announce");
      expect(phases.at(-1)).toBe("done");
      expect(steps.join("\n")).toContain("The build is green.");
      expect(steps.join("\n")).toContain("(stayed silent)");
      expect(await stop.textContent()).toContain("stopped: silence");
      const reached = await sessions.getByRole("list", { name: "phases" }).locator("li[data-reached=true]").count();
      expect(reached).toBeGreaterThanOrEqual(4);
      await shot("converse");
    },
    timeout,
  );

  it(
    "lists past sessions, filters them by agent, and opens one with its steps",
    async () => {
      const sessions = view("sessions");
      const past = sessions.getByRole("complementary", { name: "past sessions" });
      const items = past.getByRole("list").first().locator("li button");
      await expect.poll(() => items.count(), { timeout: wait }).toBeGreaterThanOrEqual(1);
      expect(await items.first().textContent()).toContain("planner → builder");
      expect(await items.first().textContent()).toContain("done");
      await past.getByLabel("With agent", { exact: true }).fill("nobody");
      await past.getByRole("button", { name: "Filter" }).click();
      await expect.poll(() => past.getByText("no sessions").count(), { timeout: wait }).toBe(1);
      await past.getByLabel("With agent", { exact: true }).fill("builder");
      await past.getByRole("button", { name: "Filter" }).click();
      await expect.poll(() => items.count(), { timeout: wait }).toBe(1);
      await items.first().click();
      const stop = sessions.getByRole("region", { name: "stop reason" });
      await stop.waitFor({ timeout: wait });
      expect(await stop.textContent()).toContain("stopped: silence");
      const steps = await sessions.getByRole("list", { name: "steps" }).locator("li").allTextContents();
      expect(steps.join("\n")).toContain("The build is green.");
      expect(steps[0]).toMatch(/^#1accepted/);
      await shot("past-session");
      await sessions.getByRole("button", { name: "Close" }).click();
    },
    timeout,
  );

  it(
    "lists tasks filtered by state and opens one with its history and artifacts",
    async () => {
      await page.keyboard.press("3");
      const tasks = view("tasks");
      await tasks.getByRole("combobox", { name: "State", exact: true }).selectOption({ label: "canceled" });
      await tasks.getByRole("button", { name: "Filter" }).click();
      const items = tasks.getByRole("list").first().locator("li button");
      // The slow task canceled from its reply panel, and the two of the busy thread.
      await expect.poll(() => items.count(), { timeout: wait }).toBe(3);
      for (const label of await items.allTextContents()) expect(label).toContain("canceled");
      await tasks.getByLabel("Context id", { exact: true }).fill(`e2e-${run}`);
      await tasks.getByRole("combobox", { name: "State", exact: true }).selectOption({ label: "any" });
      await tasks.getByRole("button", { name: "Filter" }).click();
      await expect.poll(() => items.count(), { timeout: wait }).toBe(2);
      await items.first().click();
      const detail = tasks.locator(".detail-pane");
      await expect.poll(() => detail.textContent(), { timeout: wait }).toContain("Artifacts (1)");
      expect(await detail.textContent()).toMatch(/History \(\d+ messages\)/);
      await shot("tasks");
    },
    timeout,
  );

  it(
    "deletes a thread after confirmation, and another tenant's key shows none of alice's data",
    async () => {
      await page.getByRole("button", { name: /^Threads/ }).click();
      const threads = view("threads");
      // The busy test left its contextId in the search box, which filters the list.
      await threads.getByLabel("search by context id", { exact: true }).fill("");
      await threads.getByRole("button", { name: new RegExp(`slow-${run}`) }).click();
      await threads.getByRole("button", { name: "Delete thread" }).click();
      const dialog = page.getByRole("dialog", { name: "confirm delete" });
      await dialog.getByRole("button", { name: "Delete" }).click();
      await expect
        .poll(() => threads.getByRole("button", { name: new RegExp(`slow-${run}`) }).count(), { timeout: wait })
        .toBe(0);
      expect(await threads.getByRole("button", { name: new RegExp(`e2e-${run}`) }).count()).toBe(1);

      await page.getByLabel("API key", { exact: true }).fill("key-bob");
      await page.getByRole("button", { name: "Connect" }).click();
      await expect
        .poll(() => page.getByRole("status", { name: "tenant" }).textContent(), { timeout: wait })
        .toBe("tenant bob");
      await expect.poll(() => view("threads").locator(".items").textContent(), { timeout: wait }).toBe("no threads");
      expect(pageErrors).toEqual([]);
    },
    timeout,
  );
});
