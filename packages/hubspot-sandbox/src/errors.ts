import { randomUUID } from "node:crypto";

/** An answer the routes give: a status and a JSON body. */
export interface Answer {
  status: number;
  body: unknown;
}

/**
 * HubSpot's error body (the `Error` model of the official clients: `status`, `message`,
 * `correlationId`, `category`, and, where there is something to say, `errors`, `context`, `links`,
 * `subCategory`). The sandbox sends the four keys every error has.
 */
export function errorAnswer(status: number, category: string, message: string): Answer {
  return { status, body: { status: "error", message, correlationId: randomUUID(), category } };
}

export const badRequest = (message: string): Answer => errorAnswer(400, "VALIDATION_ERROR", message);

export const notFound = (): Answer => errorAnswer(404, "OBJECT_NOT_FOUND", "resource not found");

/**
 * A path naming an object type the account does not have. Recorded answers show a 400 whose body
 * has no `category`: `{status, message: "Unable to infer object type from: <name>", correlationId}`.
 */
export const unknownType = (name: string): Answer => ({
  status: 400,
  body: {
    status: "error",
    message: `Unable to infer object type from: ${name}`,
    correlationId: randomUUID(),
  },
});
