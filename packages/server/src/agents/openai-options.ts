import { z } from "zod";

/** The `options` of an openai agent in the configuration (PARLEY_OPENAI_* may fill them in). */
export const openaiOptionsSchema = z.strictObject({
  /** An OpenAI-compatible API root, such as https://api.openai.com/v1 or http://127.0.0.1:11434/v1 (Ollama). */
  baseUrl: z.url({ protocol: /^https?$/ }),
  model: z.string().min(1),
  /** Sent as the bearer token; empty or absent: no authorization header. */
  apiKey: z.string().optional(),
  /** Empty or absent: Parley's prompt, which tells the model the history block is context only. */
  systemPrompt: z.string().optional(),
  /** Sampling temperature; absent: the endpoint's default. */
  temperature: z.number().min(0).max(2).optional(),
});

export type OpenAIOptions = z.output<typeof openaiOptionsSchema>;
