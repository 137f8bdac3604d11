// The scaling figures of bench/run.mjs: the parts --only names (history, growth, flat, streams), one after another.
import { flatPart } from "./scaling-flat.mjs";
import { growthPart } from "./scaling-growth.mjs";
import { historyPart } from "./scaling-history.mjs";
import { streamsPart } from "./scaling-streams.mjs";

/** The figures of every part the run asks for, by part (history's server also gives idle and appends). */
export async function runScaling(ctx) {
  const { only, withScaling } = ctx.settings;
  const scaling = {};
  // --only=history,growth,flat,streams picks scaling parts too (each part's name).
  const part = (name) => {
    if (only?.has(name)) ctx.matched.add(name);
    return !only || only.has(name);
  };
  if (!withScaling || !(part("history") || part("growth") || part("flat") || part("streams"))) return scaling;
  process.stderr.write("scaling:\n");
  if (part("history")) Object.assign(scaling, await historyPart(ctx));
  if (part("growth")) scaling.growth = await growthPart(ctx);
  if (part("flat")) scaling.flat = await flatPart(ctx);
  if (part("streams")) scaling.streams = await streamsPart(ctx);
  return scaling;
}
