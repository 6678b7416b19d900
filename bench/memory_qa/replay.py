"""The model's answers to a memory QA run's ingestion, kept across runs
(``python -m bench.memory_qa --ingest model --ingest-replay FILE``; harness.py wraps the
ingestion's model in :class:`ReplayingModel` when the ledger holds a :class:`Replay`)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict


class Replay:
    """The model's answers to the ingestion's requests, kept in a JSON Lines file
    (``--ingest-replay``): a request asked before (the same model, messages, tools and
    options) gets the answer it got then, without a call. Ingesting through a small model
    takes hours; with the replay, a change to how the questions are answered is measured
    on the same memory the model made, and the run is repeatable (the summaries are not
    asked at temperature 0). A request never seen (a changed ingestion prompt) goes to the
    model and is added to the file."""

    def __init__(self, path: str) -> None:
        self.path, self.answers = path, {}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    record = json.loads(line)
                    self.answers[record["key"]] = record["answer"]

    @staticmethod
    def key(model: str, call: str, **request) -> str:
        text = json.dumps({"model": model, "call": call, **request}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, key: str) -> dict | None:
        return self.answers.get(key)

    def put(self, key: str, answer: dict) -> None:
        self.answers[key] = answer
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"key": key, "answer": answer}, ensure_ascii=False) + "\n")


class ReplayingModel:
    """A model whose answers come from a :class:`Replay` when it holds them."""

    def __init__(self, inner, replay: Replay) -> None:
        self.inner, self.replay = inner, replay
        self.name, self.offline = inner.name, inner.offline

    def stream(self, *, messages, tools=None, **options):
        from memory.llm import Completion, LLMError, ToolCall, Usage

        key = Replay.key(self.name, "stream", messages=messages, tools=tools, **options)
        answer = self.replay.get(key)
        if answer is None:
            try:
                *_, completion = self.inner.stream(messages=messages, tools=tools, **options)
            except LLMError as err:
                answer = {"error": str(err), "status": err.status}
            else:
                answer = {
                    "content": completion.content,
                    "tool_calls": [asdict(call) for call in completion.tool_calls],
                    "usage": asdict(completion.usage) if completion.usage else None,
                }
            self.replay.put(key, answer)
        if "error" in answer:
            raise LLMError(answer["error"], status=answer["status"])
        if answer["content"]:
            yield answer["content"]
        usage = answer["usage"]
        yield Completion(
            answer["content"],
            tuple(ToolCall(**call) for call in answer["tool_calls"]),
            Usage(**usage) if usage else None,
            self.name,
        )

    def complete_json(self, *, messages, **options):
        from memory.llm import LLMError

        key = Replay.key(self.name, "json", messages=messages, **options)
        answer = self.replay.get(key)
        if answer is None:
            try:
                answer = {"json": self.inner.complete_json(messages=messages, **options)}
            except LLMError as err:
                answer = {"error": str(err), "status": err.status}
            self.replay.put(key, answer)
        if "error" in answer:
            raise LLMError(answer["error"], status=answer["status"])
        return answer["json"]
