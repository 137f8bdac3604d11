import { render } from "preact";
import { App } from "./views/app.js";
import "./styles.css";

render(<App />, document.getElementById("app")!);
