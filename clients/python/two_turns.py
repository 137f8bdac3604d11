"""Two SendMessage calls on one contextId over plain gRPC, from Python.

Proves the contract is polyglot: the second reply must carry the first turn
inside the server's history guard block.

Usage: python3 two_turns.py HOST:PORT GENERATED_DIR
"""

import re
import sys
import uuid


def reply_text(response):
    if response.HasField("message"):
        return "".join(p.text for p in response.message.parts)
    task = response.task
    text = "".join(p.text for a in task.artifacts for p in a.parts)
    return text or "".join(p.text for p in task.status.message.parts)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: two_turns.py HOST:PORT GENERATED_DIR")
    address, generated = sys.argv[1], sys.argv[2]
    # The generated modules are made at test time, never committed.
    sys.path.insert(0, generated)
    import grpc
    from lf.a2a.v1 import a2a_pb2, a2a_pb2_grpc

    metadata = [("a2a-version", "1.0")]
    with grpc.insecure_channel(address) as channel:
        a2a = a2a_pb2_grpc.A2AServiceStub(channel)

        def send(text, context_id=""):
            message = a2a_pb2.Message(
                message_id=str(uuid.uuid4()),
                context_id=context_id,
                role=a2a_pb2.ROLE_USER,
                parts=[a2a_pb2.Part(text=text)],
            )
            return a2a.SendMessage(a2a_pb2.SendMessageRequest(message=message), metadata=metadata, timeout=20)

        first_text = "python says hello " + uuid.uuid4().hex[:8]
        first = send(first_text)
        context_id = first.task.context_id
        if not context_id.startswith("ctx-"):
            sys.exit(f"expected a server-generated ctx- contextId, got {context_id!r}")
        second = send("and asks again", context_id)
        second_reply = reply_text(second)
        guard = re.search(r"<<<PARLEY_HISTORY (\w+)>>>(.*)<<<END_PARLEY_HISTORY \1>>>", second_reply, re.S)
        if guard is None:
            sys.exit(f"the second reply has no history guard block: {second_reply!r}")
        if first_text not in guard.group(2):
            sys.exit(f"the guard block lacks the first turn {first_text!r}: {guard.group(2)!r}")
        print(f"context {context_id}")
        print(f"first reply: {reply_text(first)}")
        print(f"second reply: {second_reply}")
        print("ok: the second turn saw the first inside the guard block")


if __name__ == "__main__":
    main()
