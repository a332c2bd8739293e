# Asks two questions and awaits each answer from stdin through asyncio
# (loop.connect_read_pipe): the thread waits in epoll_wait.
import asyncio
import sys


async def main():
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    for question, key in (("Project name? ", "name"), ("License? ", "license")):
        sys.stdout.write(question)
        sys.stdout.flush()
        answer = await reader.readline()
        print(f"{key}={answer.decode().strip()}", flush=True)


asyncio.run(main())
