import { type Message, type Part, Role } from "@a2a-js/sdk";

/** A2A 1.0 messages as the official client (`@a2a-js/sdk`) sends them: parts and a user message. */

export const dataPart = (data: unknown): Part => ({
  content: { $case: "data", value: data },
  metadata: undefined,
  filename: "",
  mediaType: "application/json",
});

export const textPart = (text: string): Part => ({
  content: { $case: "text", value: text },
  metadata: undefined,
  filename: "",
  mediaType: "text/plain",
});

export function userMessage(parts: Part[], extra: Partial<Message> = {}): Message {
  return {
    messageId: crypto.randomUUID(),
    contextId: "",
    taskId: "",
    role: Role.ROLE_USER,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
    ...extra,
  };
}
