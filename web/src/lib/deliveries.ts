// Deliveries a person can read (issue 29): the messages a loop or a reminder
// puts in a session are frames meant for the model (docs/LOOPS.md,
// docs/REMINDERS.md); the browser shows their prompt instead, and never
// shows a frame as a session's title.

const ENTITIES: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };

/**
 * The text of XML character data: the five named entities and numeric
 * references; anything else is left as it is.
 */
export function unescapeXml(s: string): string {
  return s.replace(/&(lt|gt|amp|quot|apos|#\d+|#x[0-9a-fA-F]+);/g, (whole: string, name: string) => {
    if (name[0] !== "#") return ENTITIES[name];
    const code = name[1] === "x" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
    try {
      return String.fromCodePoint(code);
    } catch {
      return whole;
    }
  });
}

/**
 * A loop delivery's frame: `<loop>\n  <loop_id>ID</loop_id>\n  <prompt>ESCAPED</prompt>\n</loop>`;
 * null when `text` is not one.
 */
export function parseLoopFrame(text: string): { loopId: string; prompt: string } | null {
  const m = /^\s*<loop>\s*<loop_id>([^<]*)<\/loop_id>\s*<prompt>([^<]*)<\/prompt>\s*<\/loop>\s*$/.exec(text);
  return m ? { loopId: unescapeXml(m[1]), prompt: unescapeXml(m[2]) } : null;
}

/** A JSON string literal at the start of `s`. */
function jsonStringAt(s: string): { value: string; rest: string } | null {
  const m = /^"(?:[^"\\\n]|\\.)*"/.exec(s);
  if (!m) return null;
  try {
    return { value: JSON.parse(m[0]), rest: s.slice(m[0].length) };
  } catch {
    return null;
  }
}

/**
 * A reminder's follow-up frame (docs/REMINDERS.md, "Delivery"):
 * `[SCHEDULE REMINDER] schedule_id: "ID" occurrence_at: INSTANT prompt: "PROMPT"`.
 */
export function parseReminderFrame(text: string): { scheduleId: string; occurrenceAt: string; prompt: string } | null {
  const head = /^\[SCHEDULE REMINDER\] schedule_id: /.exec(text);
  if (!head) return null;
  const id = jsonStringAt(text.slice(head[0].length));
  if (!id) return null;
  const at = /^ occurrence_at: (\S+) prompt: /.exec(id.rest);
  if (!at) return null;
  const prompt = jsonStringAt(id.rest.slice(at[0].length));
  if (!prompt) return null;
  return { scheduleId: id.value, occurrenceAt: at[1], prompt: prompt.value };
}

/**
 * A session's title as a person should see it. Sessions made by a `new` loop
 * (or first woken by a reminder) before issue 29 have the delivery frame as
 * their fallback title, possibly cut off and with its line breaks folded:
 * those show the frame's prompt, or "Loop run" / "Reminder" when the prompt
 * did not survive the cut.
 */
export function displayTitle(title: string | undefined | null): string | undefined {
  if (typeof title !== "string") return undefined;
  if (/^\s*<loop>/.test(title)) {
    const m = /<prompt>([^<]*)<\/prompt>/.exec(title);
    const prompt = m ? unescapeXml(m[1]).replace(/\s+/g, " ").trim() : "";
    return prompt || "Loop run";
  }
  if (title.startsWith("[SCHEDULE REMINDER]")) {
    const frame = parseReminderFrame(title);
    const prompt = frame ? frame.prompt.replace(/\s+/g, " ").trim() : "";
    return prompt || "Reminder";
  }
  return title;
}
