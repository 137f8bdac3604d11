import type { ComponentChildren } from "preact";
import { hasNext, hasPrevious, nextPage, type Pager as PagerState, pageLabel, previousPage } from "../logic/paging.js";

/** A paged list of selectable rows (threads, tasks): each row a button with a title line and a meta line. */
export function PickList<T>(props: {
  items: readonly T[];
  idOf: (item: T) => string;
  selected: string | undefined;
  onSelect: (id: string) => void;
  title: (item: T) => ComponentChildren;
  meta: (item: T) => ComponentChildren;
  empty: string;
  pager: PagerState;
  onPage: (move: (p: PagerState) => PagerState) => void;
}) {
  const { pager } = props;
  return (
    <>
      <ul class="items">
        {props.items.map((item) => {
          const id = props.idOf(item);
          return (
            <li key={id}>
              <button
                type="button"
                class={`item ${id === props.selected ? "selected" : ""}`}
                onClick={() => props.onSelect(id)}
                aria-current={id === props.selected}
              >
                <span class="item-title" title={id}>
                  {props.title(item)}
                </span>
                <span class="item-meta">{props.meta(item)}</span>
              </button>
            </li>
          );
        })}
        {props.items.length === 0 && <li class="muted empty">{props.empty}</li>}
      </ul>
      <div class="pager">
        <button type="button" disabled={!hasPrevious(pager)} onClick={() => props.onPage(previousPage)}>
          ← Newer
        </button>
        <span class="muted">{pageLabel(pager)}</span>
        <button type="button" disabled={!hasNext(pager)} onClick={() => props.onPage(nextPage)}>
          Older →
        </button>
      </div>
    </>
  );
}
