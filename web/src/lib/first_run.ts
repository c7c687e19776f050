// What the landing page tells a new user about models (issue 31, "the first
// run explains itself"). The lines are docs/CONFIG.md's, "Connecting a real
// model", word for word (web/test/first_run.test.js checks they are).

/** True when new sessions would get the offline echo model, which only repeats the message. */
export function isOfflineEcho(model: { provider: string; description: string }): boolean {
  return model.provider === "echo" || model.description.includes("offline echo model");
}

export interface ConnectRecipe {
  name: string;  // a heading for it
  note: string;  // one sentence on what to change
  lines: string[];  // environment lines, for a shell or a service's environment file
}

/** How to connect a real model through the environment; the host reads it when it starts. */
export const CONNECT_RECIPES: ConnectRecipe[] = [
  {
    name: "An OpenAI-compatible server",
    note: "OpenAI itself, or any server with the Chat Completions API; use its address, key and a model it serves.",
    lines: [
      "OPENAI_BASE_URL=https://api.openai.com/v1",
      "OPENAI_API_KEY=sk-your-key",
      "DSH_MODEL=openai/gpt-4o-mini",
    ],
  },
  {
    name: "DeepSeek",
    note: "With a key from DeepSeek's platform; deepseek/deepseek-reasoner is its reasoning model.",
    lines: ["DEEPSEEK_API_KEY=sk-your-key", "DSH_MODEL=deepseek/deepseek-chat"],
  },
  {
    name: "Ollama on this machine",
    note: "No key; the model is one you pulled (ollama pull llama3.2).",
    lines: ["OPENAI_BASE_URL=http://localhost:11434/v1", "DSH_MODEL=openai/llama3.2"],
  },
  {
    name: "llama.cpp's llama-server on this machine",
    note: "No key; the server answers with the model it was started with, whatever the name.",
    lines: ["OPENAI_BASE_URL=http://localhost:8080/v1", "DSH_MODEL=openai/local"],
  },
];
