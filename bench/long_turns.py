"""Long conversation turns for ``bench/ingest.py --long``: a person and the assistant
talking over many sessions, each turn several sentences (so several chunks), generated
from a seed with no outside data.

The sentences are filled templates about everyday matters (plans, preferences, work,
family, health, money, travel), with names, places, numbers and dates varied, so the
texts differ as real turns do: in length, words and facts, not just in a counter.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

PERSON = "Dana"
ME = "me"

_PEOPLE = ["my brother Tom", "my manager Priya", "our neighbour Mrs Okafor", "my friend Lena", "my mother",
           "the kids", "my partner Sam", "a colleague from the Berlin office", "my dentist", "the landlord"]  # fmt: skip
_PLACES = ["Lisbon", "the lake house", "Kyoto", "the farmers' market", "the new gym on Fifth Street", "Oslo",
           "my parents' place in Porto", "the office downtown", "a small cabin near Banff", "the public library"]  # fmt: skip
_THINGS = ["the quarterly report", "a birthday dinner", "the car insurance renewal", "a half marathon",
           "the kitchen renovation", "a piano recital", "the visa application", "a job interview",
           "the tax return", "a camping trip", "the wedding speech", "a vegetarian cookbook"]  # fmt: skip
_FOODS = ["spicy ramen", "oat milk lattes", "grilled sardines", "dark chocolate", "lentil soup", "fresh figs",
          "sourdough toast", "green curry", "cold brew", "mushroom risotto"]  # fmt: skip
_DAYS = ["on Monday", "next Tuesday", "this Thursday evening", "over the weekend", "on the 14th", "in early May",
         "before the end of the month", "at 7:30 in the morning", "after lunch on Friday", "in two weeks"]  # fmt: skip
_FEELINGS = ["nervous", "relieved", "a bit overwhelmed", "excited", "tired", "optimistic", "frustrated", "calm"]

_USER = [
    "I finally booked {thing} for {day}, and {person} is coming along.",
    "Honestly I've been feeling {feeling} about {thing} since last week.",
    "You know I can't stand {food}, but {person} keeps ordering it whenever we meet.",
    "My favourite thing right now is {food}; I have it almost every day around {n} pm.",
    "We're thinking about moving to {place} sometime next year, maybe in {month}.",
    "{Person} called me yesterday and asked whether I could help with {thing}.",
    "The budget for {thing} is about {n}00 euros, which is more than I planned.",
    "I ran {n} kilometres this morning and my knee started hurting near the end.",
    "Remind me that {person} is allergic to {food}, I keep forgetting it.",
    "Last time I was in {place} it rained for {n} days straight and we stayed inside reading.",
    "I promised {person} I'd finish {thing} {day}, so please keep me honest.",
    "Work has been hectic: {n} meetings yesterday and none of them about {thing}.",
    "I'd prefer to travel by train to {place} rather than fly, if the times work.",
    "My plan is to wake up at {n} every day in {month} and write for an hour.",
    "I'm not sure whether {person} would enjoy {place}, they usually like quieter places.",
    "I tried making {food} at home on Sunday and it turned out better than expected.",
    "The appointment with {person} got moved {day}, which clashes with {thing}.",
    "I think I'll skip {thing} this year; it's been {n} years in a row and I'm {feeling}.",
]
_ASSISTANT = [
    "That sounds like a good plan; booking {thing} early usually saves a lot of stress.",
    "If the budget is tight, you could split {thing} into {n} smaller steps over {month}.",
    "It might help to write down what makes you feel {feeling} about {thing}, then tackle one item at a time.",
    "I'll remember that {person} doesn't like {food}, so we can plan the menu around it.",
    "Trains to {place} take a little longer, but you can work on the way and skip the airport queues.",
    "A gentle rule of thumb is to increase your running distance by no more than {n} percent a week.",
    "You mentioned {place} before; spring there is usually mild, so {month} could be a nice time.",
    "Would it be easier to ask {person} to share the work on {thing}?",
    "Let's set a reminder for {day} so {thing} doesn't slip again.",
    "For a knee that hurts late in a run, shorter runs and a rest day in between are often recommended.",
    "Writing for an hour at {n} is ambitious; starting with twenty minutes may make it stick.",
    "I can draft a checklist for {thing} with the documents and deadlines you'll need.",
    "Since you enjoy {food}, a small treat after finishing {thing} could be a nice motivation.",
    "If {person} prefers quiet places, the old town of {place} early in the morning might suit them.",
    "Moving {day} is annoying, but it leaves the evening free for {thing}.",
    "It's completely fine to skip {thing} once; feeling {feeling} is a good reason to rest.",
    "You could compare the {n} options side by side and decide by the end of {month}.",
    "I noted the new date: {thing} is now {day}, with {person} joining you.",
]
_MONTHS = ["January", "March", "April", "June", "July", "September", "October", "November"]


@dataclass(frozen=True)
class Turn:
    content: str
    speaker: str
    conversation_id: str


def _sentence(rng: random.Random, template: str) -> str:
    person = rng.choice(_PEOPLE)
    return template.format(
        thing=rng.choice(_THINGS), person=person, Person=person[0].upper() + person[1:], place=rng.choice(_PLACES),
        food=rng.choice(_FOODS), day=rng.choice(_DAYS), feeling=rng.choice(_FEELINGS), month=rng.choice(_MONTHS),
        n=rng.randint(2, 12),
    )  # fmt: skip


def turns(n: int, seed: int, *, sentences: tuple[int, int] = (4, 9), per_session: int = 22) -> list[Turn]:
    """``n`` turns alternating between ``PERSON`` and the assistant, a new conversation
    every ``per_session`` turns; each turn ``sentences`` (inclusive range) sentences."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        speaker = PERSON if i % 2 == 0 else ME
        templates = _USER if speaker == PERSON else _ASSISTANT
        count = rng.randint(*sentences)
        text = " ".join(_sentence(rng, t) for t in rng.sample(templates, count))
        out.append(Turn(text, speaker, f"session-{seed}-{i // per_session}"))
    return out
